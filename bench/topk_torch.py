#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""topk_torch.py - pbox_topk (libpbox's MSTopK selection, common/topk.h)
beside torch.topk and torch.sort on the same CPU tensors, in one run.

    PBOX_LIB=build/libpbox.so /usr/bin/python3 bench/topk_torch.py [--quick]

Tensors of 1 Mi, 4 Mi, 16 Mi and 64 Mi normal floats (--quick: up to
16 Mi); densities 0.1%, 1% and 10%. Each cell is the median of the runs:
5 for pbox_topk, 3 for torch (1 at 64 Mi: torch.topk takes seconds
there). torch.topk gets |x| (what top-k by magnitude selects on) and
sorted=False; the time to take |x| is not counted. The last column is
torch.topk's time over pbox_topk's (the issue's goal: >= 5 at 1% of
64 Mi). Prints a markdown table (docs/performance.md "Top-k selection").
"""
import ctypes
import os
import statistics
import sys
import time

import torch


def lib():
    path = os.environ.get("PBOX_LIB", "build/libpbox.so")
    so = ctypes.CDLL(path)
    so.pbox_topk.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                             ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    so.pbox_topk.restype = ctypes.c_int
    return so


def timed(fn, runs):
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main():
    quick = "--quick" in sys.argv
    so = lib()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    sizes = [1 << 20, 1 << 22, 1 << 24] + ([] if quick else [1 << 26])
    print("torch %s, %d thread(s)" % (torch.__version__, torch.get_num_threads()))
    print("| floats | density | pbox_topk ms | torch.topk ms | torch.sort ms | entries (pbox / k) | torch.topk / pbox_topk |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        x = torch.randn(n)
        a = x.abs()
        slow = 1 if n >= 1 << 26 else 3
        t_sort = timed(lambda: torch.sort(a, descending=True), slow)
        for d in (0.001, 0.01, 0.1):
            k = int(n * d)
            cap = k + k // 8 + 1
            idx = torch.empty(cap, dtype=torch.int32)
            val = torch.empty(cap, dtype=torch.float32)
            m = ctypes.c_size_t()

            def ours():
                rc = so.pbox_topk(x.data_ptr(), n, k, idx.data_ptr(), val.data_ptr(),
                                  ctypes.byref(m))
                assert rc == 0, rc

            t_ours = timed(ours, 5)
            t_torch = timed(lambda: torch.topk(a, k, sorted=False), slow)
            print("| %d Mi | %g%% | %.2f | %.1f | %.1f | %d / %d | %.0f |" %
                  (n >> 20, d * 100, t_ours, t_torch, t_sort, m.value, k, t_torch / t_ours),
                  flush=True)


if __name__ == "__main__":
    main()
