"""Every collective of the canopy backend against a plain reference computed here, and against gloo
(a gloo group over the same ranks, in the same processes) wherever gloo 1.13 supports the call: every
dtype and operator, odd and empty sizes, every root. Run on every rank by run_ranks.py:

    run_ranks.py --nproc 4 -- check_collectives.py [--only reductions,movement,blocks,refusals,waiting,...]

(SECTIONS, at the end, names them all.)
"""
import datetime
import time

import torch
import torch.distributed as dist

from checks import check, main, raises

REDUCING = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
            torch.int64]
MOVED_ONLY = [torch.bool, torch.int16, torch.complex64]  # moved as bytes, never reduced
OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "product": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}
SIZES = [0, 1, 7, 1000, 65537]
LARGE = 300_001  # float32 only: more than one 1 MiB chunk

def values(rank, count, dtype, op="sum", salt=0):
    """Rank `rank`'s input: small integers, so every reduction is exact in every dtype (bfloat16 included)."""
    i = torch.arange(count, dtype=torch.int64) + salt
    if op == "product":
        v = (i + rank) % 2 + 1
    else:
        v = (i * 7 + rank * 3) % 5 + 1
        if dtype.is_floating_point or dtype in (torch.int8, torch.int32, torch.int64):
            v = v - 2  # some negative values for min and max
    if dtype == torch.bool:
        return v % 2 == 0
    return v.to(dtype)


def reference(inputs, op, dtype):
    stacked = torch.stack([x.to(torch.float64) for x in inputs])
    if op == "sum":
        result = stacked.sum(0)
    elif op == "product":
        result = stacked.prod(0)
    elif op == "min":
        result = stacked.min(0).values
    elif op == "max":
        result = stacked.max(0).values
    elif dtype.is_floating_point:  # avg: the exact sum divided once (16-bit types: in float32, rounded once)
        wide = torch.float64 if dtype == torch.float64 else torch.float32
        return (stacked.sum(0).to(wide) / len(inputs)).to(dtype)
    else:
        return torch.div(stacked.sum(0).to(torch.int64), len(inputs), rounding_mode="trunc").to(dtype)
    return result.to(dtype)


def gloo_supports(dtype, op=None):
    return dtype not in (torch.bfloat16, torch.bool, torch.int16, torch.complex64) and op != "avg"


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def check_reductions(gloo, rank, size):
    for dtype in REDUCING:
        sizes = SIZES + ([LARGE] if dtype == torch.float32 else [])
        for op, reduce_op in OPS.items():
            for count in sizes:
                inputs = [values(r, count, dtype, op) for r in range(size)]
                expected = reference(inputs, op, dtype)
                t = inputs[rank].clone()
                dist.all_reduce(t, op=reduce_op)
                check(same(t, expected), f"all_reduce {op} {dtype} x{count}")
                if gloo_supports(dtype, op):
                    g = inputs[rank].clone()
                    dist.all_reduce(g, op=reduce_op, group=gloo)
                    check(same(t, g), f"all_reduce {op} {dtype} x{count} equals gloo's")
        for op, reduce_op in OPS.items():
            for root in range(size):
                count = 1001
                inputs = [values(r, count, dtype, op, salt=root) for r in range(size)]
                t = inputs[rank].clone()
                dist.reduce(t, dst=root, op=reduce_op)
                if rank == root:
                    check(same(t, reference(inputs, op, dtype)), f"reduce {op} {dtype} root {root}")
                if gloo_supports(dtype, op):
                    g = inputs[rank].clone()
                    dist.reduce(g, dst=root, op=reduce_op, group=gloo)
                    check(rank != root or same(t, g), f"reduce {op} {dtype} root {root} equals gloo's")
            for count in (0, 5, 4099):
                inputs = [values(r, count * size, dtype, op) for r in range(size)]
                whole = reference(inputs, op, dtype)
                mine = whole[rank * count:(rank + 1) * count]
                out = torch.empty(count, dtype=dtype)
                dist.reduce_scatter(out, list(inputs[rank].chunk(size)) if count else [torch.empty(0, dtype=dtype)] * size,
                                    op=reduce_op)
                check(same(out, mine), f"reduce_scatter {op} {dtype} x{count}")
                out = torch.empty(count, dtype=dtype)
                dist.reduce_scatter_tensor(out, inputs[rank].clone(), op=reduce_op)
                check(same(out, mine), f"reduce_scatter_tensor {op} {dtype} x{count}")
    # all_reduce_coalesced: several tensors, one call
    parts = [values(rank, n, torch.float32) for n in (3, 0, 1000, 17)]
    expected = [reference([values(r, p.numel(), torch.float32) for r in range(size)], "sum", torch.float32)
                for p in parts]
    glooed = [p.clone() for p in parts]
    dist.all_reduce_coalesced(parts)
    check(all(same(p, e) for p, e in zip(parts, expected)), "all_reduce_coalesced")
    dist.all_reduce_coalesced(glooed, group=gloo)
    check(all(same(p, g) for p, g in zip(parts, glooed)), "all_reduce_coalesced equals gloo's")


def check_movement(gloo, rank, size):
    for dtype in REDUCING + MOVED_ONLY:
        for count in SIZES:
            for root in range(size):
                t = values(root, count, dtype, salt=1) if rank == root else torch.zeros(count, dtype=dtype)
                dist.broadcast(t, src=root)
                check(same(t, values(root, count, dtype, salt=1)), f"broadcast {dtype} x{count} root {root}")
                if gloo_supports(dtype) and count == 1000:
                    g = values(root, count, dtype, salt=1) if rank == root else torch.zeros(count, dtype=dtype)
                    dist.broadcast(g, src=root, group=gloo)
                    check(same(t, g), f"broadcast {dtype} equals gloo's")
            expected = [values(r, count, dtype) for r in range(size)]
            out = [torch.empty(count, dtype=dtype) for _ in range(size)]
            dist.all_gather(out, values(rank, count, dtype))
            check(all(same(o, e) for o, e in zip(out, expected)), f"all_gather {dtype} x{count}")
            if gloo_supports(dtype) and count > 0:  # gloo 1.13 dies of SIGFPE gathering empty tensors
                g = [torch.empty(count, dtype=dtype) for _ in range(size)]
                dist.all_gather(g, values(rank, count, dtype), group=gloo)
                check(all(same(o, e) for o, e in zip(out, g)), f"all_gather {dtype} x{count} equals gloo's")
            flat = torch.empty(count * size, dtype=dtype)  # views of one buffer: gathered in place
            dist.all_gather(list(flat.chunk(size)) if count else [flat[:0]] * size, values(rank, count, dtype))
            check(same(flat, torch.cat(expected)), f"all_gather into views {dtype} x{count}")
            flat = torch.empty(count * size, dtype=dtype)
            dist.all_gather_into_tensor(flat, values(rank, count, dtype))
            check(same(flat, torch.cat(expected)), f"all_gather_into_tensor {dtype} x{count}")
    works = [dist.broadcast(torch.full((100,), float(rank)), src=r, async_op=True) for r in range(size)]
    for w in works:
        w.wait()
    check(all(w.is_completed() for w in works), "async broadcasts completed")
    dist.barrier()
    objects = [None] * size
    dist.all_gather_object(objects, {"rank": rank, "name": f"r{rank}"})
    check(objects == [{"rank": r, "name": f"r{r}"} for r in range(size)], "all_gather_object")
    items = [{"step": 3}, "text", 1.5] if rank == 0 else [None, None, None]
    dist.broadcast_object_list(items, src=0)
    check(items == [{"step": 3}, "text", 1.5], "broadcast_object_list")


def check_blocks(gloo, rank, size):
    for dtype in REDUCING + MOVED_ONLY:
        for block in (0, 1, 7, 3001):
            for root in range(size):
                mine = values(rank, block, dtype, salt=root)
                out = [torch.empty(block, dtype=dtype) for _ in range(size)] if rank == root else None
                dist.gather(mine, out, dst=root)
                if rank == root:
                    check(all(same(o, values(r, block, dtype, salt=root)) for r, o in enumerate(out)),
                          f"gather {dtype} x{block} root {root}")
                with_gloo = gloo_supports(dtype) and block == 7
                if with_gloo:
                    g = [torch.empty(block, dtype=dtype) for _ in range(size)] if rank == root else None
                    dist.gather(mine, g, dst=root, group=gloo)
                    check(rank != root or all(same(o, h) for o, h in zip(out, g)), f"gather {dtype} equals gloo's")
                out = torch.empty(block, dtype=dtype)
                src = [values(r, block, dtype, salt=root + 1) for r in range(size)] if rank == root else None
                dist.scatter(out, src, src=root)
                check(same(out, values(rank, block, dtype, salt=root + 1)), f"scatter {dtype} x{block} root {root}")
                if with_gloo:
                    g = torch.empty(block, dtype=dtype)
                    dist.scatter(g, src, src=root, group=gloo)
                    check(same(out, g), f"scatter {dtype} root {root} equals gloo's")
            # all_to_all_single, equal blocks: block j of rank r's input lands in block r of rank j's output
            send = torch.cat([values(rank * size + j, block, dtype) for j in range(size)])
            out = torch.empty(block * size, dtype=dtype)
            dist.all_to_all_single(out, send)
            expected = torch.cat([values(r * size + rank, block, dtype) for r in range(size)])
            check(same(out, expected), f"all_to_all_single {dtype} x{block}")
            if gloo_supports(dtype):
                g = torch.empty(block * size, dtype=dtype)
                dist.all_to_all_single(g, send, group=gloo)
                check(same(out, g), f"all_to_all_single {dtype} x{block} equals gloo's")
        # uneven splits (rows of 3 elements), zero splits included; and the list form
        def rows(r, j):
            return (r + 2 * j) % 3  # rows rank r sends to rank j
        send = torch.cat([values(rank * 10 + j, rows(rank, j) * 3, dtype).view(-1, 3) for j in range(size)])
        out = torch.empty(sum(rows(r, rank) for r in range(size)), 3, dtype=dtype)
        dist.all_to_all_single(out, send, output_split_sizes=[rows(r, rank) for r in range(size)],
                               input_split_sizes=[rows(rank, j) for j in range(size)])
        expected = torch.cat([values(r * 10 + rank, rows(r, rank) * 3, dtype).view(-1, 3) for r in range(size)])
        check(same(out, expected), f"all_to_all_single with split sizes {dtype}")
        outs = [torch.empty(rows(r, rank) * 3, dtype=dtype) for r in range(size)]
        dist.all_to_all(outs, [values(rank * 10 + j, rows(rank, j) * 3, dtype) for j in range(size)])
        check(all(same(o, values(r * 10 + rank, rows(r, rank) * 3, dtype)) for r, o in enumerate(outs)),
              f"all_to_all lists {dtype}")
    # Calls that differ only in their split sizes (the same totals) must not share a schedule.
    for shift in (0, 1, 2, 0):
        def rows_shifted(r, j):
            return (r + 2 * j + shift) % 3
        send = torch.cat([torch.full((rows_shifted(rank, j), 2), float(10 * rank + j)) for j in range(size)])
        out = torch.empty(sum(rows_shifted(r, rank) for r in range(size)), 2)
        dist.all_to_all_single(out, send, output_split_sizes=[rows_shifted(r, rank) for r in range(size)],
                               input_split_sizes=[rows_shifted(rank, j) for j in range(size)])
        expected = torch.cat([torch.full((rows_shifted(r, rank), 2), float(10 * r + rank)) for r in range(size)])
        check(same(out, expected), f"all_to_all_single, split sizes shifted by {shift}")
    gathered = [None] * size if rank == 0 else None
    dist.gather_object({"rank": rank}, gathered, dst=0)
    check(rank != 0 or gathered == [{"rank": r} for r in range(size)], "gather_object")
    received = [None]
    dist.scatter_object_list(received, [f"for {r}" for r in range(size)] if rank == 0 else None, src=0)
    check(received == [f"for {rank}"], "scatter_object_list")


def check_refusals(gloo, rank, size):
    """Refused before anything is sent: the group stays usable afterwards."""
    pg = dist.group.WORLD
    raises("non-contiguous", "is not contiguous", lambda: dist.all_reduce(torch.ones(4, 4).t()))
    raises("sparse max", "sparse tensors are reduced with ReduceOp.SUM only",
           lambda: dist.all_reduce(torch.ones(3).to_sparse(), op=dist.ReduceOp.MAX))
    raises("sparse broadcast", "sparse (COO)", lambda: dist.broadcast(torch.ones(3).to_sparse(), src=0))
    raises("bool reduction", "cannot reduce a torch.bool", lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool)))
    # torch's all_reduce sums a complex tensor as its real view; handed over as complex, it is refused
    raises("complex reduction", "cannot reduce a torch.complex64",
           lambda: pg.allreduce([torch.ones(3, dtype=torch.complex64)]).wait())
    raises("bitwise op", "ReduceOp.BAND is not supported",
           lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.BAND))
    raises("two tensors", "exactly one tensor per process, got 2",
           lambda: pg.allreduce([torch.ones(2), torch.ones(2)]).wait())
    raises("wrong output list", "output holds 1 tensors",
           lambda: dist.all_gather([torch.empty(2)], torch.ones(2)))
    raises("wrong output size", "output 1 is a torch.float32 tensor of shape [3]",
           lambda: dist.all_gather([torch.empty(2), torch.empty(3)] + [torch.empty(2)] * (size - 2), torch.ones(2)))
    raises("output of another dtype", "output is a torch.float64",
           lambda: dist.all_gather_into_tensor(torch.empty(2 * size, dtype=torch.float64), torch.ones(2)))
    t = torch.ones(3)
    dist.all_reduce(t)  # still usable
    check(same(t, torch.full((3,), float(size))), "usable after refusals")


def check_waiting(gloo, rank, size):
    """Work.wait with a timeout, is_completed and the Future, on a call the last rank joins late."""
    t = torch.full((1000,), float(rank))
    if rank == size - 1:
        time.sleep(1.0)
        work = dist.all_reduce(t, async_op=True)
    else:
        work = dist.all_reduce(t, async_op=True)
        check(not work.is_completed(), "is_completed() is False while a rank is missing")
        raises("Work.wait(timeout)", "Work.wait(timeout) gave up after 200 ms",
               lambda: work.wait(timeout=datetime.timedelta(milliseconds=200)))
    value = work.get_future().wait()  # completes by itself: nobody called wait() successfully yet
    expected = torch.full((1000,), float(sum(range(size))))
    check(len(value) == 1 and value[0] is not None and same(value[0], expected), "the Future's value")
    check(work.is_completed() and work.wait() and same(t, expected), "completed, waited, reduced in place")


def check_profiler(gloo, rank, size):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        dist.all_reduce(torch.ones(10))
        dist.broadcast(torch.ones(10), src=0)
        dist.all_reduce(torch.ones(10), async_op=True).wait()
    names = {event.key for event in prof.key_averages()}
    for name in ("canopy:all_reduce", "canopy:broadcast"):
        check(name in names, f"torch.profiler shows {name} (saw {sorted(n for n in names if 'canopy' in n)})")


def check_sync_batch_norm(gloo, rank, size):
    """SyncBatchNorm on the CPU is refused by torch 1.13 itself, under canopy as under gloo (DDP refuses the
    converted module; its forward, batch_norm_stats, has no CPU kernel): never an error of canopy's."""
    refusals = {}
    for name, group in (("canopy", dist.group.WORLD), ("gloo", gloo)):
        net = torch.nn.SyncBatchNorm.convert_sync_batchnorm(
            torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8)), group)
        try:
            torch.nn.parallel.DistributedDataParallel(net, process_group=group)
            refusals[name] = None
        except ValueError as e:
            refusals[name] = str(e)
    check(refusals["canopy"] == refusals["gloo"] and "only work with GPU modules" in str(refusals["canopy"]),
          f"SyncBatchNorm: torch's own refusal under both backends: {refusals}")
    check(dist.group.WORLD._get_backend_name() == "canopy", "the backend's name, as SyncBatchNorm reads it")


SECTIONS = {"reductions": check_reductions, "movement": check_movement, "blocks": check_blocks,
            "refusals": check_refusals, "waiting": check_waiting, "profiler": check_profiler,
            "sync_batch_norm": check_sync_batch_norm}


if __name__ == "__main__":
    main(SECTIONS, arguments=lambda: (dist.new_group(backend="gloo"),))
