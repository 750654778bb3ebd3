#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_nobox.py - the Python package's own bookkeeping, checked without a
box (make pycheck):

- a Request that failed raises its error on every wait(), never returns
  the unreduced buffer as if it had succeeded; test() says finished;
- a second thread in Request.wait() gets EBUSY while the first waits, the
  result if it comes after the first one ended (never ECLOSED on an open
  client), and a request close() abandoned raises ECLOSED; Client(rank=
  "a") raises pbox.Error(EINVAL);
- a "pbox" process group nobody holds (dist.destroy_process_group()) or
  shut down closes its client and ends its waiter thread;
- DDP on the backend in a job sized set_backend_options(key_bytes=
  key_bytes_for(model)) holds its buckets' keys: after the first
  iterations nothing is released (buckets of different sizes too);
- the "pbox" backend's waiter thread finishes a call whose output is a
  parameter (a leaf that requires grad: AVG divides it in place) and a
  failed one on it (NaN written in place), so the Work completes instead
  of hanging;
- BoxOptimizer refuses the torch.optim flags it does not run in a param
  group dict as it does as keyword arguments;
- the backend's fallbacks that torch 1.13's Gloo lacks (reduce_scatter and
  its tensor form, all_gather_into_tensor, list all_to_all) are composed of
  Gloo calls it has, AVG included (float64; int64's refused); empty
  all-gathers complete without Gloo (which divides by zero on them): two
  processes over a real Gloo group;
- the backend refuses an output whose elements overlap (expand()) in every
  call that writes one, at once with EINVAL, before the box or Gloo;
- a non-contiguous output of all_gather_into_tensor and reduce_scatter_
  tensor goes to the box as a contiguous one does (staged), so that a
  rank's layout never changes the path it takes;
- sparse_allreduce refuses indices and values of different counts;
- the DDP hooks complete a bucket of no elements at once, without a key;
- BoxOptimizer(overlap=True)'s hooks push nothing once it is closed or
  dropped;
- BoxOptimizer.state_dict() numbers the parameters as torch does (a
  parameter twice in a group), keeps 16-bit parameters' state in fp32
  both ways, and a torch.optim.SGD checkpoint with an unused parameter
  (no momentum buffer) loads.

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
import weakref

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, check_eq, check_in, check_is, check_le  # noqa: E402
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
        check(r.test(), "a request whose pbox_wait failed: expected test() true (finished), "
              "got false")
        # abandoned by close(): ECLOSED, again on the second wait
        r = pbox.Request(c, ctypes.c_void_p(1), bytearray(4), 7)
        c._reqs.add(r)            # as a call that made it does
    finally:
        c.close()
    check(r.test(), "a request close() abandoned: expected test() true (finished), got false")
    for _ in range(2):
        expect_error(r.wait, pbox.ECLOSED, "closed before")


class _GateLock:
    """A threading.Lock whose first acquire by the thread named `gated`
    waits for `gate` (set `arrived` first): it holds that thread between
    Request.wait()'s unlocked check and its taking the client's lock."""
    def __init__(self):
        self._l = threading.Lock()
        self.gated, self.gate, self.arrived = None, threading.Event(), threading.Event()

    def acquire(self, blocking=True, timeout=-1):
        if self.gated is not None and threading.current_thread().name == self.gated:
            self.gated = None
            self.arrived.set()
            check(self.gate.wait(10), "the gate: expected it open within 10 s, it never opened")
        return self._l.acquire(blocking, timeout)

    def release(self):
        self._l.release()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


class _WaitLib:
    """libpbox for a client whose pbox_wait blocks until `done` is set,
    then succeeds."""
    def __init__(self):
        self.inside, self.done = threading.Event(), threading.Event()

    def pbox_wait(self, h):
        self.inside.set()
        check(self.done.wait(10), "the pbox_wait stub: expected its release within 10 s, "
              "never released")
        return 0

    def pbox_test(self, h):
        return 0

    def pbox_last_error(self, h):
        return b""

    def pbox_close(self, h):
        pass


def test_request_concurrent_waiters():
    """The second thread in wait(): EBUSY while the first is inside; the
    result (not a stored ECLOSED) when it took the lock after the first
    ended; a request close() abandoned: ECLOSED."""
    c = pbox.Client.__new__(pbox.Client)
    c._L, c._lock = _WaitLib(), _GateLock()
    c._idle, c._waiting, c._reqs, c._ps = threading.Condition(c._lock), 0, set(), {}
    c.control, c.job, c.rank, c.world, c._handle = "stub:1", "stub", 0, 2, object()
    buf = bytearray(4)
    r = pbox.Request(c, 1, buf, 5)
    c._reqs.add(r)
    got = {}

    def waiter():
        try:
            got[threading.current_thread().name] = r.wait()
        except pbox.Error as e:
            got[threading.current_thread().name] = e

    a = threading.Thread(target=waiter, name="first")
    a.start()
    check(c._L.inside.wait(10), "the first waiter never reached pbox_wait (waited 10 s)")
    expect_error(r.wait, pbox.EBUSY, "another thread")   # documented
    check(not r.test(), "a request in another thread's wait: expected test() false, got true")
    # a second waiter passes the unlocked check now, takes the lock after
    # the first has ended
    c._lock.gated = "second"
    b = threading.Thread(target=waiter, name="second")
    b.start()
    check(c._lock.arrived.wait(10), "the second waiter never reached the lock (waited 10 s)")
    c._L.done.set()
    a.join(10)
    c._lock.gate.set()
    b.join(10)
    check(not a.is_alive() and not b.is_alive(), f"the waiters: expected both ended after "
          f"10 s, alive: first {a.is_alive()}, second {b.is_alive()}")
    check_is(got["first"], buf, "the first waiter's result (the buffer)")
    check_is(got["second"], buf, "the second waiter's result (the buffer)")
    check_is(r.wait(), buf, "wait() again (the buffer)")          # and for good
    check(r.test(), "a finished request: expected test() true, got false")
    # a request never waited for when the client closes: ECLOSED, twice
    r2 = pbox.Request(c, 2, buf, 6)
    c._reqs.add(r2)
    c.close()
    check(r2.test(), "a request close() abandoned: expected test() true (finished), got false")
    for _ in range(2):
        expect_error(r2.wait, pbox.ECLOSED, "closed before")
    check_is(r.wait(), buf, "the finished request's wait() after close()")  # stays finished


def test_client_bad_int_arguments():
    for kw, name in (({"rank": "a"}, "rank"), ({"world": "two"}, "world"),
                     ({"timeout_ms": "x"}, "timeout_ms")):
        args = dict(control="127.0.0.1:1", job="j", rank=0, world=2)
        args.update(kw)
        expect_error(lambda: pbox.Client(**args), pbox.EINVAL, name)


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
        check(time.monotonic() < end, "the Work did not complete in 5 s")
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
    from pbox.backend import _waiter
    pg._thread = threading.Thread(target=_waiter, args=(pg._q, weakref.ref(pg)), daemon=True)
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
    check(w.is_completed(), "the Work of a parameter's AVG: expected completed, it is not")
    check(pg._thread.is_alive(), "the waiter thread: expected alive, it ended")
    check(torch.equal(p.detach(), torch.full((4,), 3.0)),
          f"the parameter after AVG over 2: expected 4 x 3.0, got {p}")
    pg._q.put(None)
    # the call fails: the parameter becomes NaN, the Work completes failed
    pg = _group(_StubClient(pbox.Error(pbox.ETIMEDOUT, "no new result")))
    p = torch.nn.Parameter(torch.ones(4))
    w = _completed(pg.allreduce([p], o))
    try:
        w.get_future().wait()
    except Exception as e:   # the future's error carries pbox.Error's text
        check_in("no new result", str(e), "the failed Work's error")
    else:
        raise AssertionError("a failed call's Work succeeded")
    check(pg._thread.is_alive(), "the waiter thread after a failed call: expected alive, it ended")
    check(torch.isnan(p.detach()).all(), f"the failed call's parameter: expected all NaN, got {p}")
    check(pg._failed and "no new result" in pg._failed,
          f"the group's first error: expected one naming 'no new result', got {pg._failed!r}")
    pg._q.put(None)


class _BoxStub:
    """pbox.backend's Client for a group of one rank: the job is sized as
    the box does (key_bytes rounded up to 64, else 256 MiB), every call is
    done at once (one rank: the sum is the tensor)."""
    made = []

    def __init__(self, control, job, rank, world, *, key_bytes=0, job_bytes=0, **kw):
        self.key_bytes = -(-int(key_bytes) // 64) * 64 if key_bytes else 256 << 20
        self.closed, self.freed = False, 0
        _BoxStub.made.append(self)

    def stats(self):
        return {"key_bytes": self.key_bytes, "seg_bytes": 1024}

    def iallreduce(self, buf, key):
        return _Req()

    def ibroadcast(self, buf, key, root):
        return _Req()

    def iallgather(self, src, out, key):
        out.copy_(src.reshape(-1))
        return _Req()

    def ireduce_scatter(self, inp, out, key):
        out.copy_(inp.reshape(-1))
        return _Req()

    def release(self, keys):
        self.freed += len(keys)

    def close(self):
        self.closed = True


def _stub_box():
    """pbox.backend over _BoxStub clients; returns the module and the
    function that undoes it."""
    need_torch()
    import pbox.backend as pb
    old = pb.Client
    pb.Client = _BoxStub
    _BoxStub.made = []

    def undo():
        pb.Client = old
        pb._options.pop("key_bytes", None)
    return pb, undo


def _waiters():
    return [t for t in threading.enumerate() if t.name == "pbox-pg-waiter"]


def test_backend_group_dropped_shuts_down():
    """init_process_group("pbox") / destroy_process_group() three times:
    each group closes its client and ends its waiter thread once torch
    drops it (no garbage collection needed); shutdown() does it at once."""
    import datetime
    import gc
    pb, undo = _stub_box()
    import torch.distributed as dist
    from torch._C._distributed_c10d import HashStore
    before = len(_waiters())
    gc.disable()
    try:
        for i in range(3):
            dist.init_process_group("pbox", store=HashStore(), rank=0, world_size=1)
            t = torch.ones(4)
            dist.all_reduce(t)
            check_eq(t.tolist(), [1.0] * 4, "all_reduce of world 1")
            dist.destroy_process_group()
            check_eq(len(_BoxStub.made), i + 1, f"group {i + 1}: clients made")
            check(_BoxStub.made[i].closed,
                  f"group {i + 1}: its client is still open after destroy_process_group()")
            check_eq(len(_waiters()), before, f"group {i + 1}: waiter threads after it")
        g = pb.ProcessGroupPBox(HashStore(), 0, 1, datetime.timedelta(seconds=10))
        check_eq(len(_waiters()), before + 1, "waiter threads with a group")
        g.shutdown()
        g.shutdown()
        check(_BoxStub.made[-1].closed, "the client after shutdown(): expected closed, still open")
        check_eq(len(_waiters()), before, "waiter threads after shutdown()")
    finally:
        gc.enable()
        undo()


def test_backend_ddp_keys_fit_key_bytes_for():
    """DDP with no hook on the backend, the job sized as docs/pytorch.md
    says: after two iterations (DDP rebuilds its buckets after the first)
    no key is released, with buckets of four different sizes too (each
    signature's lanes share a key rather than release others)."""
    pb, undo = _stub_box()
    import torch.distributed as dist
    import torch.nn as nn
    import pbox.torch as pt
    from torch._C._distributed_c10d import HashStore
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 512), nn.Linear(512, 384), nn.Linear(384, 256),
                          nn.Linear(256, 512), nn.Linear(512, 256))
    pt.set_backend_options(key_bytes=pt.key_bytes_for(model))
    dist.init_process_group("pbox", store=HashStore(), rank=0, world_size=1)
    try:
        pg = dist.distributed_c10d._get_default_group()
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.3)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        released = []
        for _ in range(8):
            opt.zero_grad()
            ddp(torch.randn(4, 512)).pow(2).mean().backward()
            opt.step()
            released.append(pg.released)
        sizes = {sig[1] for sig in pg._seq if sig[0] == "allreduce"}
        check(len(sizes) >= 4, f"buckets: expected at least 4 sizes, got {sorted(sizes)}")
        check(released[-1] == released[1],
              f"keys released after each iteration: expected none after the second, got "
              f"{released} (budget {pg._budget}, held {pg._held})")
        check_le(pg._held, pg._budget, "bytes of keys held (the budget)")
    finally:
        dist.destroy_process_group()
        undo()


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
        check_eq(out.tolist(), [10 * rank + 2 * e for e in range(3)], "reduce_scatter MAX int32")
        # its tensor form (_reduce_scatter_base)
        out = torch.zeros(3, dtype=torch.int32)
        pg._reduce_scatter_base(out, torch.cat(ins), o).wait()
        check_eq(out.tolist(), [10 * rank + 2 * e for e in range(3)],
                 "_reduce_scatter_base MAX int32")
        # all_gather_into_tensor: int32, and float32 into a non-contiguous output
        out = torch.zeros(4, dtype=torch.int32)
        pg._allgather_base(out, torch.full((2,), rank, dtype=torch.int32)).wait()
        check_eq(out.tolist(), [0, 0, 1, 1], "_allgather_base int32")
        big = torch.zeros(4, 2, dtype=torch.float64)
        pg._allgather_base(big[:, 0], torch.full((2,), rank + 0.5, dtype=torch.float64)).wait()
        check_eq(big[:, 0].tolist(), [0.5, 0.5, 1.5, 1.5], "_allgather_base into a column")
        check(not big[:, 1].any(), f"_allgather_base into a column: expected the other column "
              f"zero, got {big}")
        # AVG (Gloo has none): the sum divided by the world; int64's refused
        o.reduceOp = ReduceOp.AVG
        ins = [torch.full((2,), 1.0 + rank + 10 * i, dtype=torch.float64) for i in range(2)]
        out = torch.zeros(2, dtype=torch.float64)
        pg.reduce_scatter([out], [ins], o).wait()
        check_eq(out.tolist(), [1.5 + 10 * rank] * 2, "reduce_scatter AVG float64")
        out = torch.zeros(2, dtype=torch.float64)
        pg._reduce_scatter_base(out, torch.cat(ins), o).wait()
        check_eq(out.tolist(), [1.5 + 10 * rank] * 2, "_reduce_scatter_base AVG float64")
        expect_error(lambda: pg._reduce_scatter_base(torch.zeros(1, dtype=torch.int64),
                                                     torch.ones(2, dtype=torch.int64), o),
                     pbox.EINVAL, "AVG of torch.int64")
        # empty all-gathers: complete, Gloo untouched (it divides by zero)
        pg.allgather([[torch.zeros(0), torch.zeros(0)]], [torch.zeros(0)]).wait()
        pg._allgather_base(torch.zeros(0), torch.zeros(0)).wait()
        pg._allgather_base(torch.zeros(0, dtype=torch.int32),
                           torch.zeros(0, dtype=torch.int32)).wait()
        # list all_to_all of uneven sizes: rank r sends i + 1 elements to rank i
        ins = [torch.full((i + 1,), 10.0 * rank + i, dtype=torch.float64) for i in range(2)]
        outs = [torch.zeros(rank + 1, dtype=torch.float64) for _ in range(2)]
        pg.alltoall(outs, ins, AllToAllOptions()).wait()
        check_eq([o.tolist() for o in outs], [[10.0 * q + rank] * (rank + 1) for q in range(2)],
                 "alltoall of uneven sizes")
        check_eq(pg.calls["gloo"], 8, f"Gloo calls ({pg.calls})")
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
        check(not msgs and all(p.exitcode == 0 for p in procs),
              lambda: f"the two ranks: expected no error and exit codes 0, got "
                      f"{msgs or [p.exitcode for p in procs]}")


def test_backend_overlapping_outputs_refused():
    """Every call that writes an output refuses one whose elements overlap
    (expand()) at once with EINVAL: nothing reaches the box or Gloo, the
    group has not failed (the copy back would fail on the waiter thread,
    Gloo would write past the tensor)."""
    need_torch()
    from torch._C._distributed_c10d import (AllreduceOptions, AllToAllOptions,
                                            BroadcastOptions, GatherOptions, ReduceOptions,
                                            ReduceScatterOptions, ScatterOptions)
    pg = _group(_StubClient())
    x, e = torch.ones(2), torch.zeros(1).expand(2)
    calls = {
        "all_reduce": lambda: pg.allreduce([e], AllreduceOptions()),
        "reduce": lambda: pg.reduce([e], ReduceOptions()),
        "broadcast": lambda: pg.broadcast([e], BroadcastOptions()),
        "all_gather": lambda: pg.allgather([[torch.zeros(2), e]], [x]),
        "all_gather_into_tensor": lambda: pg._allgather_base(torch.zeros(1).expand(4), x),
        "reduce_scatter": lambda: pg.reduce_scatter([e], [[x, x]], ReduceScatterOptions()),
        "reduce_scatter_tensor": lambda: pg._reduce_scatter_base(e, torch.ones(4),
                                                                 ReduceScatterOptions()),
        "all_to_all": lambda: pg.alltoall([e, torch.zeros(2)], [x, x], AllToAllOptions()),
        "all_to_all_single": lambda: pg.alltoall_base(e, x, [], []),
        "gather": lambda: pg.gather([[e, torch.zeros(2)]], [x], GatherOptions()),
        "scatter": lambda: pg.scatter([e], [[x, x]], ScatterOptions()),
        "recv": lambda: pg.recv([e], 1),
        "all_reduce_coalesced": lambda: pg.allreduce_coalesced([x, e]),
    }
    try:
        for name, call in calls.items():
            expect_error(call, pbox.EINVAL, name, "overlapping")
        check_eq((pg.calls, pg._failed), ({"box": 0, "gloo": 0}, None),
                 "(calls, first error) after the refusals")
        check(pg._q.empty(), "the waiter's queue after the refusals: expected empty, it is not")
        # a tensor that only looks alike (size 1, stride 0) is fine
        w = _completed(pg.allreduce([torch.ones(1).expand(1)], AllreduceOptions()))
        w.get_future().wait()
    finally:
        pg._q.put(None)


def test_backend_noncontiguous_outputs_on_box():
    """all_gather_into_tensor and reduce_scatter_tensor into a
    non-contiguous output run on the box (through a contiguous copy) as
    they do into a contiguous one: the path may depend only on what every
    rank's call shares, never on one rank's layout."""
    pb, undo = _stub_box()
    import torch.distributed as dist
    from torch._C._distributed_c10d import HashStore
    dist.init_process_group("pbox", store=HashStore(), rank=0, world_size=1)
    try:
        pg = dist.distributed_c10d._get_default_group()
        for contiguous in (True, False):
            base = torch.zeros(3, 2)
            out = torch.zeros(3) if contiguous else base[:, 1]
            dist.all_gather_into_tensor(out, torch.tensor([1.0, 2.0, 3.0]))
            check_eq(out.tolist(), [1.0, 2.0, 3.0], f"all_gather_into_tensor (contiguous "
                     f"{contiguous})")
            check(not base[:, 0].any(), f"all_gather_into_tensor into column 1: expected column "
                  f"0 zero, got {base}")
            out = torch.zeros(3) if contiguous else base[:, 0]
            dist.reduce_scatter_tensor(out, torch.tensor([4.0, 5.0, 6.0]),
                                       op=dist.ReduceOp.AVG)
            check_eq(out.tolist(), [4.0, 5.0, 6.0], f"reduce_scatter_tensor AVG (contiguous "
                     f"{contiguous}; {base})")
            check_eq(pg.calls, {"box": 2 + 2 * (not contiguous), "gloo": 0},
                     f"calls (contiguous {contiguous})")
    finally:
        dist.destroy_process_group()
        undo()


def test_sparse_allreduce_counts_must_match():
    """(indices, values, size) with more values than indices, or fewer:
    EINVAL naming both counts, before anything reaches the box."""
    need_torch()
    import pbox.torch as pt
    c = unconnected(world=1)
    try:
        for idx, vals in (([4, 1, 7], [1.0, 2.0, 3.0, 4.0, 5.0]),
                          ([4, 1, 7, 2, 3], [1.0, 2.0, 3.0])):
            expect_error(lambda: pt.sparse_allreduce((idx, vals, 8), c, 2 ** 31 + 5),
                         pbox.EINVAL, f"{len(idx)} indices but {len(vals)} values")
    finally:
        c.close()


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
            check(all(f in str(e) for f in on) and "does not run" in str(e),
                  f"BoxOptimizer({kind}) of a group with {flags}: expected a ValueError naming "
                  f"{on} and 'does not run', got: {e}")
        else:
            raise AssertionError(f"BoxOptimizer({kind}) took a group with {flags}")
    # off is accepted, as torch.optim's defaults are
    pt.BoxOptimizer([dict(params=m.parameters(), lr=0.1, maximize=False)], "sgd", _PsStub())


class _Bucket:
    """What DDP hands a communication hook (torch's GradBucket)."""
    def __init__(self, index, buf, last):
        self._i, self._buf, self._last = index, buf, last

    def index(self):
        return self._i

    def buffer(self):
        return self._buf

    def is_last(self):
        return self._last


def test_hooks_empty_bucket_completes():
    """A DDP bucket of no elements (the only parameters of a dtype are
    empty): every hook completes it at once, as Gloo's allreduce does,
    without a key (a zero-element key cannot be declared: it failed
    backward with EINVAL 'tensor is empty'); as the iteration's last
    bucket it still ends the State's iteration."""
    need_torch()
    import pbox.torch as pt
    c = unconnected(world=2)    # anything reaching the client fails
    try:
        for name, hook in pt.HOOKS.items():
            st = (pt.TopkState if name == "topk" else pt.State)(c)
            for dt in (torch.float32, torch.float16):
                buf = torch.zeros(0, dtype=dt)
                out = hook(st, _Bucket(1, buf, last=True)).wait()
                check_eq((out.numel(), out.dtype), (0, dt),
                         f"{name} hook of an empty bucket: (numel, dtype)")
            check_eq((st.keys, st._iters), ({}, 2), f"{name} hook's State (keys, iterations)")
    finally:
        c.close()


class _PushStub(_PsStub):
    """A PS client whose steps return the weights unchanged; counts pushes."""
    def __init__(self):
        self._ps, self.pushes = {}, []

    def set_lr(self, key, lr):
        pass

    def ipush_pull(self, key, grad, out):
        self.pushes.append(key)
        return _Req()


def test_boxoptimizer_overlap_hooks_end_with_it():
    """BoxOptimizer(overlap=True) hooks the parameters' AccumulateGrad
    nodes, which outlive it: after close(), or once it is dropped, a
    backward for another optimizer of the same model pushes nothing of
    its (its hooks pushed its keys, and the second backward raised 'a
    gradient ... changed after the bucket was pushed')."""
    need_torch()
    import gc
    import pbox.torch as pt
    m = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    for how in ("close", "drop"):
        c1 = _PushStub()
        o1 = pt.BoxOptimizer(m.parameters(), "sgd", c1, name="one", overlap=True, lr=0.1)
        m(x).sum().backward()
        check_eq(len(c1.pushes), 1, f"pushes during backward ({c1.pushes})")
        o1.step()
        if how == "close":
            o1.close()
        else:
            del o1
            gc.collect()
        c2 = _PushStub()
        o2 = pt.BoxOptimizer(m.parameters(), "sgd", c2, name="two", lr=0.1)
        for _ in range(2):
            o2.zero_grad()
            m(x).sum().backward()
            o2.step()
        check_eq((len(c1.pushes), len(c2.pushes)), (1, 2),
                 f"{how}: pushes of the old and the new optimizer ({c1.pushes}, {c2.pushes})")


class _StateStub(_PushStub):
    """A PS client that keeps what ps_write sends and ps_read returns, as
    the box does (float32 arrays per key and part, a step count per key)."""
    def __init__(self):
        super().__init__()
        self.parts, self.steps = {}, {}

    def ps_write(self, key, data, part="weights"):
        self.parts[key, part] = data.clone()

    def ps_set_steps(self, key, steps):
        self.steps[key] = steps

    def ps_read(self, key, out, part="weights"):
        out.copy_(self.parts[key, part])
        return self.steps[key]

    def allreduce(self, buf, key):
        return buf


def test_boxoptimizer_state_dict_indices_are_torchs():
    """With a parameter twice in a group (torch 1.13 warns and goes on),
    torch numbers the parameters by position, the last one winning: the
    state_dict's state must use those numbers (it used first positions:
    torch.optim gave a's state to nothing and b's to a)."""
    need_torch()
    import warnings
    import pbox.torch as pt
    a, b = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2))
    c = _StateStub()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        o = pt.BoxOptimizer([a, a, b], "adam", c, lr=0.1)
        (key, _, n, _), = o.keys
        c.parts[key, "state0"] = torch.arange(float(n))          # a, a, b
        c.parts[key, "state1"] = torch.arange(float(n)) + 100
        c.steps[key] = 4
        sd = o.state_dict()
        a2, b2 = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2))
        t = torch.optim.Adam([a2, a2, b2], lr=0.1)
        t.load_state_dict(sd)
    check(set(t.state) == {a2, b2}, f"torch.optim's state: expected a2 and b2's, got "
          f"{list(t.state)}")
    check(torch.equal(t.state[a2]["exp_avg"], torch.tensor([3.0, 4.0, 5.0])),
          f"a's exp_avg: expected [3, 4, 5], got {t.state[a2]}")
    check(torch.equal(t.state[b2]["exp_avg"], torch.tensor([6.0, 7.0])),
          f"b's exp_avg: expected [6, 7], got {t.state[b2]}")


def test_boxoptimizer_16bit_state_kept_in_fp32():
    """The box keeps 16-bit parameters' optimizer state in fp32:
    state_dict() gives it as float32 and load_state_dict() writes it as
    given. Rounded to float16 (torch's dtype of the parameter), Adam's
    exp_avg_sq of gradients ~1e-4 became 0, and the step after a
    save/load moved the weights by lr * 1e4 instead of lr."""
    need_torch()
    import pbox.torch as pt
    w = torch.nn.Parameter(torch.zeros(4, dtype=torch.float16))
    c = _StateStub()
    o = pt.BoxOptimizer([w], "adam", c, lr=0.1)
    (key, _, n, _), = o.keys
    small = torch.full((n,), 1e-10)
    c.parts[key, "state0"], c.parts[key, "state1"] = small * 1e4, small
    c.steps[key] = 7
    sd = o.state_dict()
    st = sd["state"][0]
    check_eq(st["exp_avg_sq"].dtype, torch.float32, "state_dict's exp_avg_sq dtype")
    check(torch.equal(st["exp_avg_sq"], small), f"state_dict's exp_avg_sq: expected {small}, "
          f"got {st}")
    o2 = pt.BoxOptimizer([w], "adam", c, name="again", lr=0.1)
    o2.load_state_dict(sd)
    (key2, _, _, _), = o2.keys
    check(torch.equal(c.parts[key2, "state1"], small), f"state1 written by load_state_dict: "
          f"expected {small}, got {c.parts[key2, 'state1']}")
    check(torch.equal(c.parts[key2, "state0"], small * 1e4), f"state0 written by "
          f"load_state_dict: expected {small * 1e4}, got {c.parts[key2, 'state0']}")
    check_eq(c.steps[key2], 7, "steps written by load_state_dict")
    # torch.optim takes it too, in the parameter's dtype as it does
    t = torch.optim.Adam([w], lr=0.1)
    t.load_state_dict(sd)
    check_eq(t.state[w]["exp_avg"].dtype, torch.float16, "torch.optim.Adam's exp_avg dtype")


def test_boxoptimizer_loads_sgd_with_unused_parameters():
    """A torch.optim.SGD (momentum, dampening 0) checkpoint in which a
    parameter has no momentum buffer (unused: torch never stepped it)
    loads: that buffer as zeros, which the box continues exactly as torch
    starts one (ValueError 'different step counts [0, 1]' before); with
    dampening it cannot, and the ValueError says why."""
    need_torch()
    import pbox.torch as pt
    used, unused = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    params = list(used.parameters()) + list(unused.parameters())
    for damp in (0.0, 0.5):
        t = torch.optim.SGD(params, lr=0.1, momentum=0.9, dampening=damp)
        used(torch.randn(4, 3)).sum().backward()
        t.step()
        c = _StateStub()
        o = pt.BoxOptimizer(params, "sgd", c, lr=0.1, momentum=0.9, dampening=damp)
        (key, _, n, _), = o.keys
        if damp:
            try:
                o.load_state_dict(t.state_dict())
            except ValueError as e:
                check("no momentum buffer" in str(e) and "dampening 0.5" in str(e),
                      f"expected a ValueError naming 'no momentum buffer' and 'dampening 0.5', "
                      f"got: {e}")
            else:
                raise AssertionError("dampening 0.5: a missing buffer loaded")
            continue
        o.load_state_dict(t.state_dict())
        want = torch.cat([t.state[p]["momentum_buffer"].reshape(-1) for p in used.parameters()] +
                         [torch.zeros(p.numel()) for p in unused.parameters()])
        check(torch.equal(c.parts[key, "state0"], want),
              f"momentum buffers loaded: expected {want}, got {c.parts[key, 'state0']}")
        check_eq(c.steps[key], 1, "steps loaded")


def main():
    return run_tests(globals(), "pynobox")


if __name__ == "__main__":
    sys.exit(main())
