# SPDX-License-Identifier: BSD-3-Clause
"""barrier_check.py PAUSE_S TIMEOUT_S - for test_elastic.sh, under torchrun
with 2 ranks on the pbox backend (process group timeout TIMEOUT_S): both
allreduce once; then rank 0 sleeps PAUSE_S before dist.barrier() while
rank 1 is in it. Rank 1's barrier must not return before rank 0 arrived:
it returns after about PAUSE_S when PAUSE_S < TIMEOUT_S, else it raises
naming rank 0. Each rank prints "barrier: rank R returned after T s" or
"barrier: rank R raised after T s: ..." (exit 3)."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import pbox.torch  # noqa: F401  (registers the backend)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from checks import check_eq  # noqa: E402  (tests/python/checks.py)

pause, timeout = float(sys.argv[1]), float(sys.argv[2])
dist.init_process_group("pbox", timeout=datetime.timedelta(seconds=timeout))
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
check_eq(t.tolist(), [2.0] * 4, f"rank {rank}: the first allreduce")
if rank == 0:
    time.sleep(pause)
start = time.monotonic()
try:
    dist.barrier()
except Exception as e:  # the backend's failure: pbox.Error or RuntimeError
    print("barrier: rank %d raised after %.2f s: %s" % (rank, time.monotonic() - start, e),
          flush=True)
    sys.exit(3)
print("barrier: rank %d returned after %.2f s" % (rank, time.monotonic() - start), flush=True)
dist.destroy_process_group()
