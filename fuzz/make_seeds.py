#!/usr/bin/env python3
"""Writes the small seed corpora under fuzz/corpus/ (committed; rerun only when a format changes).

Each seed is a valid message of its format, so the fuzzer starts from inputs that get past the magic
bytes and explores the fields, not the first byte."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    directory = os.path.join(HERE, "corpus", target)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as out:
        out.write(data)


def frame(collective, dtype, op, algorithm, root, step, comm, seq, count, payload, flags=0):
    # transport/frame.hpp: magic, version, flags, collective, dtype, op, algorithm, u16 0, root, step, u32 0,
    # comm_id, seq, count, payload_bytes.
    return struct.pack("<IBBBBBBHIIIQQQQ", 0x59504E43, 1, flags, collective, dtype, op, algorithm, 0, root, step,
                       0, comm, seq, count, payload)


def field(data):
    return struct.pack("<I", len(data)) + data


def main():
    ar = frame(3, 0, 0, 3, 0, 5, 7, 12, 1000, 4000)
    write("frame", "all_reduce", ar)
    write("frame", "all_reduce_vs_broadcast", ar + frame(1, 0, 0, 0, 1, 5, 7, 12, 16, 64))
    # A broadcast whose root called it back to back (kFlagRootInStream), against the same receive unflagged.
    write("frame", "broadcast_in_stream", frame(1, 0, 0, 2, 0, 1, 7, 13, 16, 64, flags=1) +
          frame(1, 0, 0, 2, 0, 1, 7, 13, 16, 64))
    write("frame", "huge_sizes", frame(0, 7, 4, 0, 2**32 - 1, 2**32 - 1, 2**64 - 1, 2**64 - 1, 2**64 - 1,
                                       2**64 - 1))

    hello = struct.pack("<IBBHQII", 0x48504E43, 1, 0, 5, 51, 1, 4) + b"token"
    ack = struct.pack("<IBBHQII", 0x41504E43, 1, 0, 0, 51, 0, 0)
    write("handshake", "hello", hello)
    write("handshake", "ack_wrong_token", struct.pack("<IBBHQII", 0x41504E43, 1, 1, 0, 51, 0, 0))
    write("handshake", "ack", ack)

    # rendezvous/store_protocol.hpp, version 2: u32 request id, u8 command, then the command's fields.
    def request(request_id, command, body):
        return struct.pack("<IB", request_id, command) + body

    set_req = request(1, 1, field(b"rank/0") + field(b"host pid 1"))
    get_req = request(2, 2, field(b"tcp/1/addr/2") + struct.pack("<Q", 5000))
    add_req = request(3, 3, field(b"canopy/communicators/0") + struct.pack("<q", 1))
    cas_req = request(4, 4, field(b"k") + field(b"") + field(b"v"))
    check_req = request(5, 5, struct.pack("<I", 2) + field(b"a") + field(b"b"))
    wait_req = request(6, 6, struct.pack("<I", 1) + field(b"host/3") + struct.pack("<Q", 100))
    many_req = request(9, 9, struct.pack("<I", 2) + field(b"addr/0") + field(b"addr/1") + struct.pack("<Q", 100))
    write("store_protocol", "set", set_req)
    write("store_protocol", "pipelined", get_req + add_req + cas_req + check_req + wait_req +
          request(7, 7, field(b"k")) + request(8, 8, b"") + many_req)
    write("store_protocol", "value_over_limit",
          request(10, 1, field(b"k") + struct.pack("<I", 64 * 1024 * 1024 + 1)))

    write("launch_environment", "torchrun",
          b"RANK=1\nWORLD_SIZE=4\nLOCAL_RANK=1\nLOCAL_WORLD_SIZE=2\nMASTER_ADDR=127.0.0.1\nMASTER_PORT=29500\n")
    write("launch_environment", "slurm",
          b"SLURM_PROCID=5\nSLURM_NTASKS=7\nSLURM_NODEID=1\nSLURM_TASKS_PER_NODE=4(x1),3\nSLURM_JOB_ID=42\n"
          b"SLURM_STEP_ID=0\n"
          b"MASTER_ADDR=node0\n")
    write("launch_environment", "canopy",
          b"CANOPY_RANK=0\nCANOPY_WORLD_SIZE=2\nCANOPY_STORE_HOSTED=yes\nCANOPY_MASTER_ADDR=::1\n"
          b"CANOPY_MASTER_PORT=4000\nCANOPY_JOB_TOKEN=t\nCANOPY_RESTART_COUNT=2\n")
    write("launch_environment", "canopy_elastic_replacement",
          b"CANOPY_RANK=2\nCANOPY_WORLD_SIZE=4\nCANOPY_STORE_HOSTED=1\nCANOPY_MASTER_ADDR=127.0.0.1\n"
          b"CANOPY_MASTER_PORT=4000\nCANOPY_ELASTIC=3:4\nCANOPY_ELASTIC_JOIN=1\nCANOPY_RESTART_COUNT=1\n")
    write("launch_environment", "slurm_no_address",
          b"SLURM_PROCID=1\nSLURM_NTASKS=8\nSLURM_LOCALID=1\nSLURM_TASKS_PER_NODE=4(x2)\nSLURM_NODEID=0\n"
          b"SLURM_JOB_ID=42\nSLURM_STEP_ID=3\nSLURM_STEP_NODELIST=node[01-02]\nSLURMD_NODENAME=node01\n")
    write("launch_environment", "openmpi_no_address",
          b"OMPI_COMM_WORLD_RANK=1\nOMPI_COMM_WORLD_SIZE=4\nOMPI_COMM_WORLD_LOCAL_RANK=1\n"
          b"OMPI_COMM_WORLD_LOCAL_SIZE=2\nOMPI_MCA_ess_base_jobid=448856065\nCANOPY_STORE_PORT_RANGE=30000-30099\n")
    # Found by the fuzzer: NUL bytes in SLURMD_NODENAME cut the refusal short before it named the variable.
    write("launch_environment", "regression_nul_in_node_name",
          b"SLURM_PROCID=0\nSLURM_NTASKS=8\nSLURM_STEP_ID=3\nSLURM_STEP_NODELIST=node[01-02]\n"
          b"SLURMD_NODENAME=nod\x00\x00\x00\x00")
    write("slurm_hostlist", "ranges", b"node[01-04,07],gpu3")
    write("slurm_hostlist", "brackets", b"rack[1-2]-n[001-3,9]")
    write("launch_environment", "openmpi_pmi",
          b"OMPI_COMM_WORLD_RANK=2\nOMPI_COMM_WORLD_SIZE=3\nPMI_RANK=2\nPMI_SIZE=3\nCANOPY_STORE_FILE=/tmp/s\n")

    write("settings", "every_kind",
          b"CANOPY_TIMEOUT=2.5\nCANOPY_DEBUG=info\nCANOPY_CHUNK_BYTES=256K\nCANOPY_CALIBRATE=0\n"
          b"CANOPY_HEARTBEAT_SECONDS=500ms\nCANOPY_TRANSPORT=TCP\nCANOPY_SOCKET_SPIN_US=0\n"
          b"CANOPY_IB_GID_INDEX=3\nCANOPY_IB_CHUNK_BYTES=64KiB\nCANOPY_IB_REG_CACHE=true\nCANOPY_JOB_TOKEN=t\n")
    write("settings", "out_of_range", b"CANOPY_IB_CHUNK_BYTES=100\nCANOPY_TIMEOUT=0\n")


if __name__ == "__main__":
    main()
