#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_nobox.py - the Python package's own bookkeeping, checked without a
box (make pycheck):

- a Request that failed raises its error on every wait(), never returns
  the unreduced buffer as if it had succeeded; test() says finished;
- the "pbox" backend's waiter thread finishes a call whose output is a
  parameter (a leaf that requires grad: AVG divides it in place) and a
  failed one on it (NaN written in place), so the Work completes instead
  of hanging;
- BoxOptimizer refuses the torch.optim flags it does not run in a param
  group dict as it does as keyword arguments;
- the backend's fallbacks that torch 1.13's Gloo lacks (reduce_scatter and
  its tensor form, all_gather_into_tensor, list all_to_all) are composed of
  Gloo calls it has: two processes over a real Gloo group.

Stub clients stand in for the box where a call must succeed. Needs torch
(skipped with a message without it) and the tree's build/libpbox.so.
Prints one line per failure and a closing "pynobox: N passed, M failed".
"""
import collections
import ctypes
import os
import queue
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cuda_args import (expect_error, need_torch, run_tests, torch,  # noqa: E402
                            unconnected)

import pbox  # noqa: E402


def test_request_failure_raised_on_every_wait():
    c = unconnected()
    try:
        # pbox_wait itself fails (a NULL request: EINVAL from libpbox)
        r = pbox.Request(c, ctypes.c_void_p(None), bytearray(4), 8)
        c._reqs.add(r)
        for _ in range(2):
            expect_error(r.wait, pbox.EINVAL)
        assert r.test()
        # abandoned by close(): ECLOSED, again on the second wait
        r = pbox.Request(c, ctypes.c_void_p(1), bytearray(4), 7)
        r._handle = None          # what close() does to a request never waited for
        for _ in range(2):
            expect_error(r.wait, pbox.ECLOSED, "closed before")
    finally:
        c.close()


class _Req:
    """A pbox.Request whose result is already in (or failed)."""
    def __init__(self, err=None):
        self.err = err

    def wait(self):
        if self.err:
            raise self.err


class _StubClient:
    def __init__(self, err=None):
        self.err = err

    def iallreduce(self, buf, key):
        return _Req(self.err)


def _completed(w, seconds=5.0):
    """w completes within seconds (a dead waiter thread never completes it)."""
    end = time.monotonic() + seconds
    while not w.is_completed():
        assert time.monotonic() < end, "the Work did not complete in 5 s"
        time.sleep(0.01)
    return w


def _group(client):
    """A ProcessGroupPBox with its waiter thread over a stub client."""
    from torch._C._distributed_c10d import ProcessGroup
    from pbox.backend import ProcessGroupPBox
    pg = ProcessGroupPBox.__new__(ProcessGroupPBox)
    ProcessGroup.__init__(pg, 0, 2)
    pg.client, pg.calls, pg._failed = client, {"box": 0, "gloo": 0}, None
    pg._keys, pg._owner, pg._seq, pg._busy = {}, {}, {}, {}
    pg.released = 0
    pg._lru, pg._budget, pg._held, pg._seg = collections.OrderedDict(), None, 0, 64
    pg._q = queue.SimpleQueue()
    pg._thread = threading.Thread(target=pg._run, daemon=True)
    pg._thread.start()
    return pg


def test_backend_parameter_outputs_complete():
    need_torch()
    from torch._C._distributed_c10d import AllreduceOptions, ReduceOp
    o = AllreduceOptions()
    o.reduceOp = ReduceOp.AVG
    # the call succeeds: AVG divides the parameter in place
    pg = _group(_StubClient())
    p = torch.nn.Parameter(torch.full((4,), 6.0))
    w = _completed(pg.allreduce([p], o))
    w.get_future().wait()          # raises if the waiter failed
    assert w.is_completed() and pg._thread.is_alive()
    assert torch.equal(p.detach(), torch.full((4,), 3.0)), p
    pg._q.put(None)
    # the call fails: the parameter becomes NaN, the Work completes failed
    pg = _group(_StubClient(pbox.Error(pbox.ETIMEDOUT, "no new result")))
    p = torch.nn.Parameter(torch.ones(4))
    w = _completed(pg.allreduce([p], o))
    try:
        w.get_future().wait()
    except Exception as e:   # the future's error carries pbox.Error's text
        assert "no new result" in str(e), str(e)
    else:
        raise AssertionError("a failed call's Work succeeded")
    assert pg._thread.is_alive() and torch.isnan(p.detach()).all(), p
    assert pg._failed and "no new result" in pg._failed
    pg._q.put(None)


def _composed_rank(rank, path, errs):
    """One rank of test_backend_gloo_composed: a pbox group whose box
    part is absent, over a real Gloo group of 2 through a FileStore."""
    import datetime
    from torch._C._distributed_c10d import (FileStore, ProcessGroup, ProcessGroupGloo,
                                            ReduceOp, ReduceScatterOptions, AllToAllOptions)
    from pbox.backend import ProcessGroupPBox
    try:
        pg = ProcessGroupPBox.__new__(ProcessGroupPBox)
        ProcessGroup.__init__(pg, rank, 2)
        pg._gloo = ProcessGroupGloo(FileStore(path, 2), rank, 2, datetime.timedelta(seconds=20))
        pg.calls, pg._failed = {"box": 0, "gloo": 0}, None
        o = ReduceScatterOptions()
        o.reduceOp = ReduceOp.MAX
        # reduce_scatter, MAX of int32: rank r's part of the elementwise max
        ins = [torch.arange(3, dtype=torch.int32) * (rank + 1) + 10 * i for i in range(2)]
        out = torch.zeros(3, dtype=torch.int32)
        pg.reduce_scatter([out], [ins], o).wait()
        assert out.tolist() == [10 * rank + 2 * e for e in range(3)], out
        # its tensor form (_reduce_scatter_base)
        out = torch.zeros(3, dtype=torch.int32)
        pg._reduce_scatter_base(out, torch.cat(ins), o).wait()
        assert out.tolist() == [10 * rank + 2 * e for e in range(3)], out
        # all_gather_into_tensor: int32, and float32 into a non-contiguous output
        out = torch.zeros(4, dtype=torch.int32)
        pg._allgather_base(out, torch.full((2,), rank, dtype=torch.int32)).wait()
        assert out.tolist() == [0, 0, 1, 1], out
        big = torch.zeros(4, 2)
        pg._allgather_base(big[:, 0], torch.full((2,), rank + 0.5)).wait()
        assert big[:, 0].tolist() == [0.5, 0.5, 1.5, 1.5] and not big[:, 1].any(), big
        # list all_to_all of uneven sizes: rank r sends i + 1 elements to rank i
        ins = [torch.full((i + 1,), 10.0 * rank + i, dtype=torch.float64) for i in range(2)]
        outs = [torch.zeros(rank + 1, dtype=torch.float64) for _ in range(2)]
        pg.alltoall(outs, ins, AllToAllOptions()).wait()
        assert [o.tolist() for o in outs] == [[10.0 * q + rank] * (rank + 1) for q in range(2)]
        assert pg.calls["gloo"] == 5, pg.calls
    except BaseException as e:  # noqa: BLE001 (report it to the parent)
        errs.put(f"rank {rank}: {type(e).__name__}: {e}")
        raise


def test_backend_gloo_composed():
    """The collectives torch 1.13's Gloo lacks, in the fallback cases
    (ops and dtypes the box does not take), run composed on Gloo."""
    need_torch()
    import multiprocessing as mp
    import tempfile
    ctx = mp.get_context("fork")
    errs = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        procs = [ctx.Process(target=_composed_rank, args=(r, os.path.join(d, "store"), errs))
                 for r in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
                p.join()
        msgs = []
        while not errs.empty():
            msgs.append(errs.get())
        assert not msgs and all(p.exitcode == 0 for p in procs), (
            msgs or [p.exitcode for p in procs])


class _PsStub:
    rank, _ps = 0, {}

    def declare_optimizer(self, *a, **kw):
        pass

    def ps_init(self, key, up, out):
        out.copy_(up)


def test_boxoptimizer_flags_in_groups_refused():
    need_torch()
    import pbox.torch as pt
    m = torch.nn.Linear(2, 1)
    for kind, flags in (("adam", {"amsgrad": True}), ("sgd", {"maximize": True}),
                        ("adamw", {"maximize": True, "amsgrad": False})):
        try:
            pt.BoxOptimizer([dict(params=m.parameters(), lr=0.1, **flags)], kind, _PsStub())
        except ValueError as e:
            on = [f for f, v in flags.items() if v]
            assert all(f in str(e) for f in on) and "does not run" in str(e), str(e)
        else:
            raise AssertionError(f"BoxOptimizer({kind}) took a group with {flags}")
    # off is accepted, as torch.optim's defaults are
    pt.BoxOptimizer([dict(params=m.parameters(), lr=0.1, maximize=False)], "sgd", _PsStub())


def main():
    return run_tests(globals(), "pynobox")


if __name__ == "__main__":
    sys.exit(main())
