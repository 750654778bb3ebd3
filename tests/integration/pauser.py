# SPDX-License-Identifier: BSD-3-Clause
"""pauser.py RANK WORLD JOB PAUSE_S ITERS - for test_elastic.sh: every rank
allreduces 1 MiB of (rank + 1) ITERS times and checks each sum exactly;
rank 0 sleeps PAUSE_S before its second call (a checkpoint, an evaluation)
while the others already wait in it. Prints "rank R: ok ..." with the time
the second call took, or "rank R: error after T s: ..." and exits 3."""
import os
import sys
import time

import numpy as np

import pbox

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from checks import check_eq  # noqa: E402  (tests/python/checks.py)

rank, world, job = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
pause, iters = float(sys.argv[4]), int(sys.argv[5])
c = pbox.Client(job=job, rank=rank, world=world)
want = world * (world + 1) / 2
second = 0.0
start = time.monotonic()
try:
    for i in range(iters):
        if i == 1 and rank == 0:
            time.sleep(pause)
        a = np.full(1 << 18, rank + 1, dtype=np.float32)
        t0 = time.monotonic()
        c.allreduce(a, key=1)
        if i == 1:
            second = time.monotonic() - t0
        check_eq(int(a.min()), int(want), f"rank {rank} call {i}: min of the sum")
        check_eq(int(a.max()), int(want), f"rank {rank} call {i}: max of the sum")
except pbox.Error as e:
    print("rank %d: error after %.2f s: %s" % (rank, time.monotonic() - start, e), flush=True)
    sys.exit(3)
st = c.stats()
print("rank %d: ok %d calls, the second took %.2f s; %d WAITs, %d retransmitted" %
      (rank, iters, second, st["waits"], st["retransmits"]), flush=True)
c.close()
