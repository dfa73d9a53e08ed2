"""new_group with overlapping groups, and point-to-point on a subset while other ranks run collectives.
Four ranks, started by run_ranks.py:

    run_ranks.py --nproc 4 -- check_groups.py [--only groups,p2p]
"""
import torch
import torch.distributed as dist

from checks import check, main


def rank_sum(ranks):
    return float(sum(r + 1 for r in ranks))


def check_groups(rank, size):
    # Every rank calls new_group for every group, as torch requires; the creator runs on members only.
    layouts = [[0, 1, 2], [1, 2, 3], [0, 3], [2], list(range(size))]
    groups = [dist.new_group(ranks) for ranks in layouts]
    gloo = dist.new_group(layouts[0], backend="gloo")  # a gloo group beside them
    for round_ in range(3):
        for ranks, group in zip(layouts, groups):
            if rank not in ranks:
                continue
            check(dist.get_backend(group) == "canopy", "new_group's backend is canopy")
            check(dist.get_rank(group) == ranks.index(rank), f"group rank in {ranks}")
            t = torch.full((1000 + round_,), float(rank + 1))
            dist.all_reduce(t, group=group)
            check(torch.equal(t, torch.full_like(t, rank_sum(ranks))), f"all_reduce in {ranks} round {round_}")
            b = torch.arange(17.0) * (ranks[-1] + 1) if rank == ranks[-1] else torch.zeros(17)
            dist.broadcast(b, src=ranks[-1], group=group)  # src is a global rank
            check(torch.equal(b, torch.arange(17.0) * (ranks[-1] + 1)), f"broadcast in {ranks}")
    # Calls on two groups in flight at once, issued in different orders on different ranks.
    a, b = groups[0], groups[1]
    if rank in (1, 2):  # members of both
        ta, tb = torch.ones(50_000), torch.ones(50_000) * 2
        order = [(a, ta), (b, tb)] if rank == 1 else [(b, tb), (a, ta)]
        works = [dist.all_reduce(t, group=g, async_op=True) for g, t in order]
        for w in works:
            w.wait()
        check(torch.equal(ta, torch.full_like(ta, 3.0)) and torch.equal(tb, torch.full_like(tb, 6.0)),
              "two groups in flight")
    elif rank in layouts[0]:
        t = torch.ones(50_000)
        dist.all_reduce(t, group=a)
        check(torch.equal(t, torch.full_like(t, 3.0)), "group a alongside")
    else:
        t = torch.ones(50_000) * 2
        dist.all_reduce(t, group=b)
        check(torch.equal(t, torch.full_like(t, 6.0)), "group b alongside")
    if rank in layouts[0]:
        t, g = torch.full((10,), float(rank)), torch.full((10,), float(rank))
        dist.all_reduce(t, group=groups[0])
        dist.all_reduce(g, group=gloo)
        check(torch.equal(t, g), "a canopy group equals a gloo group over the same ranks")
    dist.barrier()


def check_p2p(rank, size):
    # The program of issue 16: rank 0 sends to rank 1, then all four all_reduce.
    data = torch.arange(1000.0)
    if rank == 0:
        dist.send(data, dst=1)
    elif rank == 1:
        got = torch.zeros(1000)
        dist.recv(got, src=0)
        check(torch.equal(got, data), "send/recv before a collective")
    t = torch.ones(10)
    dist.all_reduce(t)
    check(torch.equal(t, torch.full_like(t, float(size))), "all_reduce after point-to-point")

    # isend/irecv between ranks 0 and 1, both ways and on two tags, while ranks 2 and 3 run collectives on
    # their own group and on the default group is left alone until everyone is done.
    pair = dist.new_group([2, 3])
    if rank in (0, 1):
        peer = 1 - rank
        sends = [dist.isend(torch.full((20_000,), float(rank * 100 + i)), dst=peer, tag=i % 2) for i in range(6)]
        received = [torch.zeros(20_000) for _ in range(6)]
        # tag 1 first: messages match by (source, tag), each tag in order
        recvs = [dist.irecv(received[i], src=peer, tag=1) for i in (1, 3, 5)]
        recvs += [dist.irecv(received[i], src=peer, tag=0) for i in (0, 2, 4)]
        for w in sends + recvs:
            w.wait()
        check(all(torch.equal(received[i], torch.full((20_000,), float(peer * 100 + i))) for i in range(6)),
              "isend/irecv on two tags")
    else:
        for i in range(20):
            t = torch.full((5000,), float(rank + i))
            dist.all_reduce(t, group=pair)
            check(torch.equal(t, torch.full_like(t, float(5 + 2 * i))), "collective beside point-to-point")
    t = torch.ones(10)
    dist.all_reduce(t)
    check(torch.equal(t, torch.full_like(t, float(size))), "all_reduce after the subset's messages")

    # Messages between ranks 0 and 1 while an all-reduce of the same group is in flight on every rank.
    big = torch.ones(2_000_000)
    reduction = dist.all_reduce(big, async_op=True)
    if rank in (0, 1):
        mine, theirs = torch.full((30_000,), float(rank)), torch.zeros(30_000)
        works = [dist.isend(mine, dst=1 - rank, tag=5), dist.irecv(theirs, src=1 - rank, tag=5)]
        for w in works:
            w.wait()
        check(torch.equal(theirs, torch.full_like(theirs, float(1 - rank))), "isend/irecv during an all-reduce")
    reduction.wait()
    check(torch.equal(big, torch.full_like(big, float(size))), "the all-reduce beside the messages")

    # A ring with batch_isend_irecv (sends and receives posted together: no rank may block in a send).
    right, left = (rank + 1) % size, (rank - 1) % size
    out, inp = torch.full((100_000,), float(rank)), torch.zeros(100_000)
    ops = [dist.P2POp(dist.isend, out, right), dist.P2POp(dist.irecv, inp, left)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    check(torch.equal(inp, torch.full_like(inp, float(left))), "batch_isend_irecv ring")
    # The Future of a receive completes by itself.
    if rank < 2:
        t = torch.zeros(3) if rank == 1 else torch.ones(3)
        work = dist.irecv(t, src=0) if rank == 1 else dist.isend(t, dst=1)
        work.get_future().wait()
        check(torch.equal(t, torch.ones(3)), "point-to-point Future")
    dist.barrier()


SECTIONS = {"groups": check_groups, "p2p": check_p2p}


if __name__ == "__main__":
    main(SECTIONS)
