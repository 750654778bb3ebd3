# SPDX-License-Identifier: BSD-3-Clause
"""leaver.py RANK WORLD JOB - for test_failures.sh: ranks below WORLD-1
allreduce forever; the last rank joins, allreduces once, then leaves
(pbox_close) while the others are in their next allreduce. Each rank
prints its outcome; the others must fail naming the rank that left."""
import os
import sys
import time

import numpy as np

import pbox

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from checks import check_eq  # noqa: E402  (tests/python/checks.py)

rank, world, job = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = pbox.Client(job=job, rank=rank, world=world)
a = np.ones(1 << 16, dtype=np.float32)
c.allreduce(a, key=1)
check_eq(a[0], world, f"rank {rank}: element 0 of the first allreduce of ones")
if rank == world - 1:
    time.sleep(0.5)
    c.close()
    print("rank %d left" % rank)
    sys.exit(0)
start = time.monotonic()
try:
    while True:
        c.allreduce(a, key=1)
except pbox.Error as e:
    print("rank %d: error after %.2f s: %s" % (rank, time.monotonic() - start, e))
    sys.exit(3)
