#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""gloo_allreduce.py - torch.distributed all_reduce (Gloo backend, float32,
SUM, in place) timed the way pbox-perf times pbox_allreduce, for
bench/compare/compare.sh.

    gloo_allreduce.py --n N [--minbytes B] [--maxbytes B] [--stepfactor F]
                      [--iters I] [--warmup W] [--reps R] [--psgd RANK]
                      [--addr 127.0.0.1] [--port 29600] [--netns NAME{rank}] [--local L]

Starts N processes (torch.multiprocessing, spawn); with --netns each first
enters its own network namespace. They rendezvous through init_method
tcp://ADDR:PORT. For every size and rep the ranks meet at a
barrier, run W untimed calls, then I timed calls back to back. Rank 0 prints
one line per (rep, size), the same format as mpi_allreduce:

    rep bytes us_per_call

(the mean of the I calls on rank 0). Gloo picks its network interface from
GLOO_SOCKET_IFNAME if set, else from the host name. Each process uses one
intra-op thread (torch.set_num_threads(1)): the machine is small and the
ranks share it. Exits non-zero if any rank fails.

--psgd RANK: each call is instead one PowerSGD step of rank RANK on the
tensor as a matrix of rows = floor(sqrt(count)) (the algorithm of torch's
powerSGD_hook, with error feedback and warm start, as the training-quality
suite runs it): M = tensor + error, P = M Q, all_reduce(P), P
orthonormalised, Q = M^T P, all_reduce(Q), tensor = P Q^T / N, error =
M - tensor. What goes over the links is (rows + cols) * RANK floats a call;
the time includes the two matrix products and the error feedback, as a
training step would see it.
"""
import argparse
import sys
import time


def parse_size(s):
    mul = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}
    s = s.strip()
    if s and s[-1].lower() in mul:
        return int(float(s[:-1]) * mul[s[-1].lower()])
    return int(float(s))


def sizes(a):
    s = float(a.minbytes)
    while s <= a.maxbytes:
        count = int(s) // 4
        if count:
            yield count
        s *= a.stepfactor


CLONE_NEWNET = 0x40000000


def enter_netns(name):
    """Move this process (its only thread so far) into the named network
    namespace (/run/netns/NAME), as `ip netns exec` would; threads started
    later (Gloo's) inherit it."""
    import ctypes
    import os
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/run/netns/" + name, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns(%s): %s" % (name, os.strerror(e)))
    finally:
        os.close(fd)


class PowerSGD:
    """One PowerSGD rank-r step per call on a tensor (module docstring)."""

    def __init__(self, torch, dist, r, world):
        self.torch, self.dist, self.r, self.world = torch, dist, r, world
        self.state = {}

    def __call__(self, t):
        torch = self.torch
        n = t.numel()
        rows = max(1, int(n ** 0.5))
        cols = n // rows
        st = self.state.get(n)
        if st is None:
            g = torch.Generator().manual_seed(0)
            st = self.state[n] = (torch.zeros(rows, cols),
                                  torch.randn(cols, self.r, generator=g))
        err, q = st
        m = t[:rows * cols].view(rows, cols)
        m.add_(err)
        p = m @ q
        self.dist.all_reduce(p)
        for i in range(self.r):   # Gram-Schmidt on P's columns
            c = p[:, i]
            for j in range(i):
                c.sub_(p[:, j] * (p[:, j] @ c))
            c.div_(c.norm() + 1e-8)
        torch.mm(m.t(), p, out=q)
        self.dist.all_reduce(q)
        err.copy_(m)
        torch.mm(p, q.t(), out=m)
        m.div_(self.world)
        err.sub_(m)


def worker(rank, a):
    if a.netns:   # with --local L, the namespace of the host's first rank
        enter_netns(a.netns.format(rank=rank - rank % a.local))
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://%s:%d" % (a.addr, a.port),
                            rank=rank, world_size=a.n)
    buf = torch.empty(a.maxbytes // 4, dtype=torch.float32)
    call = PowerSGD(torch, dist, a.psgd, a.n) if a.psgd else dist.all_reduce
    if rank == 0:
        print("# gloo_allreduce: world %d, torch %s, %s, iters %d, warmup %d, reps %d"
              % (a.n, torch.__version__, "PowerSGD rank %d" % a.psgd if a.psgd else
                 "f32 SUM in place", a.iters, a.warmup, a.reps), flush=True)
        print("# rep bytes us_per_call", flush=True)
    for rep in range(a.reps):
        for count in sizes(a):
            t = buf[:count]
            t.fill_(1.0)
            dist.barrier()
            for _ in range(a.warmup):
                call(t)
            t0 = time.perf_counter()
            for _ in range(a.iters):
                call(t)
            us = (time.perf_counter() - t0) * 1e6 / a.iters
            if rank == 0:
                print("%d %d %.3f" % (rep, count * 4, us), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--minbytes", type=parse_size, default=4096)
    p.add_argument("--maxbytes", type=parse_size, default=64 << 20)
    p.add_argument("--stepfactor", type=float, default=4)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--psgd", type=int, default=0,
                   help="each call one PowerSGD step of this rank instead of an all_reduce")
    p.add_argument("--addr", default="127.0.0.1")
    p.add_argument("--port", type=int, default=29600)
    p.add_argument("--netns", default="",
                   help="network namespace of each rank, {rank} replaced (e.g. pbox-w{rank}-7); "
                        "default: stay in the caller's")
    p.add_argument("--local", type=int, default=1,
                   help="ranks per host: rank r runs in the namespace of rank r - r %% L "
                        "(compare.sh --local)")
    a = p.parse_args()
    if a.local < 1 or a.n % a.local:
        sys.exit("gloo_allreduce.py: --local must divide --n")
    if a.psgd < 0:
        p.error("--psgd needs a rank >= 1")
    if a.n < 1 or a.iters < 1 or a.reps < 1 or a.stepfactor <= 1 or a.minbytes < 4 \
            or a.maxbytes < a.minbytes:
        p.error("need --n >= 1, --iters/--reps >= 1, --stepfactor > 1, 4 <= minbytes <= maxbytes")
    import torch.multiprocessing as mp
    try:
        mp.spawn(worker, args=(a,), nprocs=a.n, join=True)
    except Exception as e:  # ProcessRaisedException, ProcessExitedException
        print("gloo_allreduce: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
