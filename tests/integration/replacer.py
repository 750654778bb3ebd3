# SPDX-License-Identifier: BSD-3-Clause
"""replacer.py RANK WORLD JOB ITERS STEPFILE [resume] - for test_elastic.sh:
a rank of a job that waits for replacements (PBOX_REPLACE_WAIT): call i
allreduces 256 KiB of (i + 1) * (rank + 1) and checks the sum exactly;
rank 0 writes i to STEPFILE before each call. A call that fails with
EAGAIN (a lost rank was replaced) is made again, from its input. With
"resume" the rank is a replacement: it starts at the call STEPFILE names.
Prints "rank R: ok calls A..B, N made again" or "rank R: error ..." (exit 3)."""
import os
import sys
import time

import numpy as np

import pbox

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from checks import check_eq  # noqa: E402  (tests/python/checks.py)

rank, world, job, iters, stepfile = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                     int(sys.argv[4]), sys.argv[5])
resume = len(sys.argv) > 6 and sys.argv[6] == "resume"
start = 0
if resume:
    with open(stepfile) as f:
        start = int(f.read())
try:
    c = pbox.Client(job=job, rank=rank, world=world)
except pbox.Error as e:
    print("rank %d: error joining: %s" % (rank, e), flush=True)
    sys.exit(3)
again = 0
t0 = time.monotonic()
want = world * (world + 1) // 2
i = start
try:
    while i < iters:
        if rank == 0:
            with open(stepfile + ".tmp", "w") as f:
                f.write("%d\n" % i)
            os.rename(stepfile + ".tmp", stepfile)
        a = np.full(1 << 16, (i + 1) * (rank + 1), dtype=np.float32)
        try:
            c.allreduce(a, key=1)
        except pbox.Error as e:
            if e.code != pbox.EAGAIN or again >= 5:
                raise
            again += 1
            print("rank %d: call %d made again (at %.3f): %s" % (rank, i, time.time(), e),
                  flush=True)
            continue
        check_eq(int(a.min()), (i + 1) * want, f"rank {rank} call {i}: min of the sum")
        check_eq(int(a.max()), (i + 1) * want, f"rank {rank} call {i}: max of the sum")
        i += 1
        time.sleep(0.01)
except pbox.Error as e:
    print("rank %d: error at call %d after %.2f s: %s" % (rank, i, time.monotonic() - t0, e),
          flush=True)
    sys.exit(3)
print("rank %d: ok calls %d..%d, %d made again" % (rank, start, iters - 1, again), flush=True)
c.close()
