#!/usr/bin/env python3
"""Real NCCL (the one PyTorch ships) on one GPU, through ctypes, with a profiler plugin:
all-reduces and send/recv groups; prints RESULT lines.

One process is one rank. With --world 1 (the default) a process makes its own one-rank
communicators and sends to itself. With --world N, N processes (--rank 0..N-1) share one
communicator on the same GPU: each gets its own NCCL_HOSTID, so NCCL sees N hosts, skips its
same-GPU check and carries the traffic over its socket network transport, which gives the
proxy, proxy-step and kernel-channel events a one-rank job never produces. Rank 0 writes the
unique id to --uid-file; the others wait for it."""
import argparse
import ctypes
import os
import sys
import time
from ctypes import POINTER, c_int, c_size_t, c_void_p

ap = argparse.ArgumentParser()
ap.add_argument("--plugin", default="none")
ap.add_argument("--name", default="")
ap.add_argument("--iters", type=int, default=20000)
ap.add_argument("--bytes", type=int, default=4096)
ap.add_argument("--p2p", type=int, default=200)
ap.add_argument("--comms", type=int, default=1)
ap.add_argument("--cycles", type=int, default=1)
ap.add_argument("--fork", action="store_true")
ap.add_argument("--world", type=int, default=1, help="ranks in the communicator, one process each")
ap.add_argument("--rank", type=int, default=0)
ap.add_argument("--uid-file", default="", help="--world > 1: where rank 0 leaves the unique id")
ap.add_argument("--stall-rank", type=int, default=-1, help="this rank sleeps before the last all-reduce")
ap.add_argument("--stall-s", type=float, default=0.0)
a = ap.parse_args()
os.environ["NCCL_PROFILER_PLUGIN"] = a.plugin
if a.world > 1:
    # Read once, when NCCL first hashes the host: one "host" per rank.
    os.environ["NCCL_HOSTID"] = f"ncclprof-rank-{a.rank}"
import torch  # noqa: E402

torch.cuda.init()
path = next((l.split()[-1] for l in open("/proc/self/maps") if "libnccl.so" in l), None)
if path is None:
    import glob
    import site

    cands = [g for d in site.getsitepackages() for g in glob.glob(d + "/nvidia/nccl*/lib/libnccl.so*")]
    path = cands[0] if cands else "libnccl.so.2"
print("libnccl:", path, flush=True)
nccl = ctypes.CDLL(path)


class UID(ctypes.Structure):
    _fields_ = [("b", ctypes.c_char * 128)]


def chk(r, what):
    if r != 0:
        nccl.ncclGetErrorString.restype = ctypes.c_char_p
        sys.exit(f"RESULT fail {what}: {r} {nccl.ncclGetErrorString(r)}")


nccl.ncclCommInitRank.argtypes = [POINTER(c_void_p), c_int, UID, c_int]
for f in ("ncclAllReduce",):
    getattr(nccl, f).argtypes = [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]
for f in ("ncclSend", "ncclRecv"):
    getattr(nccl, f).argtypes = [c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]
v = c_int()
nccl.ncclGetVersion(ctypes.byref(v))
def unique_id(c, k):
    """A fresh id for one-rank communicators; rank 0's id, shared through a file, for --world > 1."""
    uid = UID()
    if a.world == 1:
        chk(nccl.ncclGetUniqueId(ctypes.byref(uid)), "uid")
        return uid
    path = f"{a.uid_file}.{c}.{k}"
    if a.rank == 0:
        chk(nccl.ncclGetUniqueId(ctypes.byref(uid)), "uid")
        with open(path + ".tmp", "wb") as f:
            f.write(bytes(uid))  # all 128 bytes (uid.b would stop at the first NUL)
        os.rename(path + ".tmp", path)
        return uid
    deadline = time.time() + 120
    while not os.path.exists(path):
        if time.time() > deadline:
            sys.exit(f"RESULT fail no unique id at {path}")
        time.sleep(0.05)
    return UID.from_buffer_copy(open(path, "rb").read())


def cycle(c):
    comms = []
    for k in range(a.comms):
        uid = unique_id(c, k)
        comm = c_void_p()
        chk(nccl.ncclCommInitRank(ctypes.byref(comm), a.world, uid, a.rank), "init")
        comms.append(comm)
    n = max(a.bytes // 4, 1)
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    s = c_void_p(torch.cuda.current_stream().cuda_stream)
    F32, SUM = 7, 0

    def allreduce(comm):
        chk(nccl.ncclAllReduce(c_void_p(x.data_ptr()), c_void_p(y.data_ptr()), n, F32, SUM, comm, s), "allreduce")

    def p2p_groups():
        """a.p2p groups of a send to the next rank and a recv from the previous one (to self
        with one rank), round robin over the communicators"""
        nxt, prv = (a.rank + 1) % a.world, (a.rank - 1) % a.world
        for i in range(a.p2p):
            comm = comms[i % len(comms)]
            chk(nccl.ncclGroupStart(), "groupstart")
            chk(nccl.ncclSend(c_void_p(x.data_ptr()), n, F32, nxt, comm, s), "send")
            chk(nccl.ncclRecv(c_void_p(y.data_ptr()), n, F32, prv, comm, s), "recv")
            chk(nccl.ncclGroupEnd(), "groupend")
        torch.cuda.synchronize()

    for i in range(100):
        allreduce(comms[i % len(comms)])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(a.iters):
        allreduce(comms[i % len(comms)])
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    ok_ar = torch.equal(x * a.world, y)
    y.zero_()
    t1 = time.perf_counter()
    p2p_groups()
    dt_p2p = time.perf_counter() - t1
    ok_p2p = torch.equal(x, y)
    if a.fork:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        print(f"RESULT forked child status={st}", flush=True)
        p2p_groups()
    if a.stall_rank >= 0:
        # A straggler: every rank but one enters the all-reduce and waits for it.
        print(f"RESULT stall-begin rank={a.rank}", flush=True)
        if a.rank == a.stall_rank:
            time.sleep(a.stall_s)
        allreduce(comms[0])
        torch.cuda.synchronize()
        print(f"RESULT stall-end rank={a.rank} allreduce_ok={torch.equal(x * a.world, y)}", flush=True)
    for comm in comms:
        chk(nccl.ncclCommFinalize(comm), "finalize")
        chk(nccl.ncclCommDestroy(comm), "destroy")
    print(
        f"RESULT cycle={c} rank={a.rank}/{a.world} nccl={v.value} plugin={a.name or a.plugin} comms={a.comms} iters={a.iters} bytes={a.bytes} "
        f"us_per_allreduce={dt / max(a.iters, 1) * 1e6:.3f} us_per_p2p_group={dt_p2p / max(a.p2p, 1) * 1e6:.3f} allreduce_ok={ok_ar} p2p_ok={ok_p2p}",
        flush=True,
    )


for c in range(a.cycles):
    cycle(c)
