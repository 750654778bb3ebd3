#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""topk_check.py CONTROL JOB RANK WORLD - the Python side of sparse keys
against a real box, one rank of WORLD (test_topk_train.sh runs them):

* pbox.torch.topk_allreduce at density 1 sends every entry: the dense sum.
* pbox.torch.sparse_allreduce of a 2-D COO tensor and of (indices, values,
  size), every rank with its own entries: bit-equal to the sum of the
  densified tensors in rank order (all ranks build all ranks' tensors from
  the seed), from +0.
* A top-k call at 1% leaves the rest in the residual: density 1 on the next
  call sends gradient + residual, so two calls sum what was given.
* The same two checks hierarchical (world even: "hosts" of two ranks,
  local=(rank % 2, 2)): the host's residual lives with its leader.
* Bad input raises before anything is sent: a sparse tensor to the dense
  entry points, densities 0 and 1.5, unsorted and out-of-range indices,
  repeated indices, indices and values of different counts, a dense
  tensor to sparse_allreduce.
* Rank 0, pbox-perf (the build's, beside $PBOX_LIB, or $PBOX_PERF):
  --topk --check over two sizes of one element count (two keys, so the
  replayed residuals start from zero again) finds every element exact;
  bad numbers (--keys beyond its cap, NaN, infinities, trailing text) are
  refused with exit code 2 and a message naming the option.
"""
import os
import subprocess
import sys

import torch

import pbox
import pbox.torch as pt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from checks import check, check_lt, check_raises  # noqa: E402  (tests/python/checks.py)


def coo(rank, it, shape):
    g = torch.Generator().manual_seed(1000 * it + rank)
    dense = torch.randint(-8, 8, shape, generator=g).float()
    dense[torch.rand(shape, generator=g) < 0.9] = 0
    return dense


def raises(fn, kind, what):
    check_raises(kind, fn, what=what)


def perf_checks(control, job):
    """pbox-perf's --topk --check replay and its argument refusals (the
    module docstring's last point)."""
    perf = os.environ.get("PBOX_PERF") or os.path.join(
        os.path.dirname(os.environ.get("PBOX_LIB", "build/libpbox.so")), "pbox-perf")
    check(os.access(perf, os.X_OK), f"no pbox-perf at {perf} (make, or set PBOX_PERF)")

    def run(n, *args):
        return subprocess.run([perf, "--control", control, "--job", f"{job}-perf{n}", "--rank",
                               "0", "--world", "1", *args], capture_output=True, text=True,
                              timeout=60)
    # 4096 and 4100 bytes: 1024 elements twice, on two keys
    r = run(0, "--topk", "0.01", "--check", "--minbytes", "4096", "--maxbytes", "4100",
            "--stepfactor", "1.0005", "--iters", "3", "--warmup", "0")
    lines = [ln.split() for ln in r.stdout.splitlines() if ln.strip() and ln[0] != "#"]
    check(r.returncode == 0 and len(lines) == 2 and all(
        ln[1] == "1024" and ln[6] == "0" for ln in lines),
        f"pbox-perf --topk --check, two sizes of 1024 elements: expected rc 0 and two lines "
        f"of 1024 elements, none wrong, got rc {r.returncode}\n{r.stdout}{r.stderr}")
    bad = (("--keys", "4000000"), ("--keys", "0"), ("--stepfactor", "nan"),
           ("--stepfactor", "2x"), ("--stepfactor", "inf"), ("--blast-seconds", "nan"),
           ("--topk", "0.5x"), ("--sparse", "nan"), ("--maxbytes", "nan"),
           ("--maxbytes", "inf"), ("--minbytes", "1e30"))
    for n, (opt, val) in enumerate(bad, 1):
        # the bad value last: before the fix the run would go on, briefly
        r = run(n, "--maxbytes", "64", "--iters", "1", "--warmup", "0", opt, val)
        check(r.returncode == 2 and f"{opt} '{val}'" in r.stderr,
              f"pbox-perf {opt} {val}: rc {r.returncode} (want 2 and a message naming it)\n"
              f"{r.stderr[-400:]}")


def main():
    control, job, rank, world = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    c = pbox.Client(control, job, rank, world, timeout_ms=20000)
    n = 5000
    # density 1: the dense sum (small integers: exact in any order)
    x = torch.arange(n, dtype=torch.float32) % 7 + rank
    want = sum(torch.arange(n, dtype=torch.float32) % 7 + r for r in range(world))
    s = pt.topk_allreduce(x.clone(), c, 2**31 + 1, density=1.0)
    check(torch.equal(s, want), f"topk_allreduce at density 1: expected the dense sum {want}, "
          f"got {s}")
    # two calls: 1% then everything; the residual keeps the rest
    g = torch.arange(n, dtype=torch.float32) * (1 + rank) - 1234.0
    a = pt.topk_allreduce(g.clone(), c, 2**31 + 2, density=0.01)
    b = pt.topk_allreduce(torch.zeros(n), c, 2**31 + 2, density=1.0)
    total = sum(torch.arange(n, dtype=torch.float32) * (1 + r) - 1234.0 for r in range(world))
    check(torch.equal(a + b, total), lambda: f"top-k at 0.01 then 1: expected the total, max "
          f"|difference| {float((a + b - total).abs().max())}")
    check_lt(int((a != 0).sum()), 0.05 * n, "entries sent at density 0.01")
    if world % 2 == 0:   # hierarchical: hosts of two ranks
        loc = (rank % 2, 2)
        s = pt.topk_allreduce(x.clone(), c, 2**31 + 7, density=1.0, local=loc)
        check(torch.equal(s, want), f"hierarchical topk_allreduce at density 1: expected the "
              f"dense sum {want}, got {s}")
        a = pt.topk_allreduce(g.clone(), c, 2**31 + 8, density=0.01, local=loc)
        b = pt.topk_allreduce(torch.zeros(n), c, 2**31 + 8, density=1.0, local=loc)
        check(torch.equal(a + b, total), lambda: f"hierarchical top-k at 0.01 then 1: expected "
              f"the total, max |difference| {float((a + b - total).abs().max())}")
        check_lt(int((a != 0).sum()), 0.05 * n, "hierarchical: entries sent at density 0.01")
        raises(lambda: pt.topk_allreduce(torch.ones(10), c, 2**31 + 9, local=(2, 2)),
               pbox.Error, "local_rank 2 of 2")
    if "LOCAL_RANK" not in os.environ:
        raises(lambda: pt.TopkState(c, local="env"), ValueError, "local='env' without torchrun")
    # sparse tensors
    shape = (40, 50)
    for it in range(3):
        mine = coo(rank, it, shape)
        out = pt.sparse_allreduce(mine.to_sparse(), c, 2**31 + 3)
        ref = torch.zeros(shape)
        for r in range(world):
            ref += coo(r, it, shape)
        check(torch.equal(out, ref), lambda: f"sparse_allreduce of a COO tensor, iteration "
              f"{it}: expected the ranks' dense sum, max |difference| "
              f"{float((out - ref).abs().max())}")
        flat = mine.reshape(-1)
        idx = flat.nonzero().reshape(-1)
        out1 = pt.sparse_allreduce((idx, flat[idx], flat.numel()), c, 2**31 + 4)
        check(torch.equal(out1, ref.reshape(-1)), lambda: f"sparse_allreduce of (indices, "
              f"values, size), iteration {it}: expected the ranks' dense sum, max |difference| "
              f"{float((out1 - ref.reshape(-1)).abs().max())}")
    # bad input
    s = coo(rank, 9, shape).to_sparse()
    raises(lambda: c.allreduce(s, 7), pbox.Error, "sparse tensor to allreduce")
    raises(lambda: pt.topk_allreduce(torch.ones(10), c, 2**31 + 5, density=0), pbox.Error,
           "density 0")
    raises(lambda: pt.topk_allreduce(torch.ones(10), c, 2**31 + 5, density=1.5), pbox.Error,
           "density 1.5")
    raises(lambda: c.allreduce_sparse([3, 1], torch.ones(2), torch.zeros(10), 2**31 + 6),
           pbox.Error, "unsorted indices")
    raises(lambda: c.allreduce_sparse([1, 10], torch.ones(2), torch.zeros(10), 2**31 + 6),
           pbox.Error, "index out of range")
    raises(lambda: pt.sparse_allreduce(([2, 2], torch.ones(2), 10), c, 2**31 + 6), ValueError,
           "repeated indices")
    raises(lambda: pt.sparse_allreduce(([4, 1, 7], torch.ones(5), 8), c, 2**31 + 6), pbox.Error,
           "3 indices but 5 values")
    raises(lambda: pt.sparse_allreduce(torch.ones(3), c, 2**31 + 6), TypeError,
           "dense tensor to sparse_allreduce")
    raises(lambda: pt.TopkState(c, density=0), ValueError, "TopkState density 0")
    st = c.stats()
    c.close()
    if rank == 0:
        perf_checks(control, job)
    print(f"topk_check: rank {rank}/{world} ok, {st['sparse_entries']} sparse entries sent")
    return 0


if __name__ == "__main__":
    sys.exit(main())
