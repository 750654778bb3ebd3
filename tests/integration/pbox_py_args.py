#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""pbox_py_args.py - the Python binding's argument checks and error
reporting, plus a world-1 round trip of every buffer type through the box.

Usage: pbox_py_args.py CONTROL      (run where CONTROL is reachable)
Prints 'pbox_py_args: N passed, 0 failed'; exits non-zero on a failure.
"""
import os
import sys
import threading

import numpy as np
import torch

import pbox
import pbox.torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from checks import check, check_eq, check_is, check_raises  # noqa: E402  (tests/python/checks.py)

CONTROL = sys.argv[1]
results = []


def run(name, fn):
    try:
        fn()
    except AssertionError as e:
        results.append((name, False, str(e)))
        print(f"FAIL {name}: {e}", flush=True)
        return
    except Exception as e:  # an unexpected exception is a failure too
        results.append((name, False, repr(e)))
        print(f"FAIL {name}: {e!r}", flush=True)
        return
    results.append((name, True, ""))
    print(f"ok   {name}", flush=True)


def raises(code, fn, *words):
    """fn() raises pbox.Error of code (or one of the tuple code) naming
    every one of words, in any case; returns it."""
    e = check_raises(pbox.Error, fn, what=f"a call that must fail with code {code}")
    codes = code if isinstance(code, tuple) else (code,)
    check(e.code in codes, f"expected pbox.Error code {code}, got {e.name} ({e.code}): {e}")
    for w in words:
        check(w.lower() in str(e).lower(),
              f"expected the message to hold {w!r} (in any case), got {str(e)!r}")
    return e


# --- without a box ------------------------------------------------------
def no_control():
    env = {k: os.environ.pop(k) for k in ("PBOX_CONTROL",) if k in os.environ}
    try:
        raises(pbox.EINVAL, lambda: pbox.Client(job="t", rank=0, world=1), "control")
    finally:
        os.environ.update(env)


def no_rank():
    env = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE") if k in os.environ}
    try:
        raises(pbox.EINVAL, lambda: pbox.Client(CONTROL, job="t"), "rank")
    finally:
        os.environ.update(env)


def bad_job():
    raises(pbox.EINVAL, lambda: pbox.Client(CONTROL, job="bad job!", rank=0, world=1), "job name")


def bad_rank():
    raises(pbox.EINVAL, lambda: pbox.Client(CONTROL, job="t", rank=4, world=4), "rank 4")


def unreachable():
    # port 1 on the worker's own loopback: connection refused at once
    raises(pbox.ECONNECT, lambda: pbox.Client("127.0.0.1:1", job="t", rank=0, world=1))


def job_from_env():
    os.environ["TORCHELASTIC_RUN_ID"] = "run id/with:odd chars"
    try:
        c = pbox.Client(CONTROL, rank=0, world=1)
        check_eq(c.job, "run-id-with-odd-chars", "the job from TORCHELASTIC_RUN_ID")
        c.close()
    finally:
        del os.environ["TORCHELASTIC_RUN_ID"]


for name, fn in [("no control address", no_control), ("no rank/world", no_rank),
                 ("bad job name", bad_job), ("rank out of range", bad_rank),
                 ("unreachable box", unreachable), ("job from TORCHELASTIC_RUN_ID", job_from_env)]:
    run(name, fn)

# --- with a world-1 job on the box ---------------------------------------
c = pbox.Client(CONTROL, job="pyargs", rank=0, world=1, timeout_ms=5000)
print(repr(c), "lib:", pbox.library_path(), flush=True)


def roundtrip():
    key = 100
    for t in (torch.arange(1000, dtype=torch.float32) - 500.5,
              torch.linspace(-3, 3, 777).to(torch.float16),
              torch.linspace(-3, 3, 5000).to(torch.bfloat16)):
        want = t.clone()
        check_is(c.allreduce(t, key), t, f"{t.dtype}: allreduce's result (its buffer)")
        check(torch.equal(t, want), f"{t.dtype}: world-1 sum changed values: expected {want}, "
              f"got {t}")
        key += 1
    for a in (np.linspace(-1, 1, 3000, dtype=np.float32),
              np.linspace(-1, 1, 99).astype(np.float16)):
        want = a.copy()
        c.allreduce(a, key)
        check(np.array_equal(a, want), f"{a.dtype}: world-1 sum changed values: expected "
              f"{want}, got {a}")
        key += 1


def non_contiguous():
    t = torch.zeros(8, 8).t()
    raises(pbox.EINVAL, lambda: c.allreduce(t, 1), "contiguous")
    a = np.zeros((8, 8), dtype=np.float32).T
    raises(pbox.EINVAL, lambda: c.allreduce(a, 1), "contiguous")


def wrong_dtype():
    raises(pbox.EINVAL, lambda: c.allreduce(torch.zeros(4, dtype=torch.float64), 1), "float64")
    raises(pbox.EINVAL, lambda: c.allreduce(torch.zeros(4, dtype=torch.int32), 1), "int32")
    raises(pbox.EINVAL, lambda: c.allreduce(np.zeros(4, dtype=np.float64), 1), "float64")
    raises(pbox.EINVAL, lambda: c.allreduce([1.0, 2.0], 1), "list")


def other_bad_buffers():
    raises(pbox.EINVAL, lambda: c.allreduce(torch.zeros(0), 1), "empty")
    ro = np.zeros(4, dtype=np.float32)
    ro.flags.writeable = False
    raises(pbox.EINVAL, lambda: c.allreduce(ro, 1), "read-only")
    raises(pbox.EINVAL, lambda: c.allreduce(torch.zeros(4), -1), "range")
    raises(pbox.EINVAL, lambda: c.allreduce(torch.zeros(4), 2 ** 32), "range")
    raises(pbox.EINVAL, lambda: c.allreduce(torch.zeros(4), "k"), "int")


def size_mismatch():
    c.allreduce(torch.zeros(10), 200)
    # the client catches it (EINVAL); a mismatch between ranks is the box's EREJECTED
    e = raises((pbox.EINVAL, pbox.EREJECTED), lambda: c.allreduce(torch.zeros(20), 200), "200")
    check(e.message, f"expected a message, got an empty one: {e!r}")


def async_and_threads():
    # several keys in flight from several threads, waited elsewhere
    ts = [torch.full((4096,), float(i)) for i in range(8)]
    reqs = [c.iallreduce(t, 300 + i) for i, t in enumerate(ts)]
    errs = []

    def waiter(r):
        try:
            r.wait()
        except Exception as e:
            errs.append(e)
    th = [threading.Thread(target=waiter, args=(r,)) for r in reqs]
    for x in th:
        x.start()
    for x in th:
        x.join(30)
    check(not errs, f"waits from threads: expected no error, got {errs}")
    for i, t in enumerate(ts):
        check(torch.all(t == i), f"key {300 + i}: expected all {float(i)}, got {t}")


def busy_key():
    t1, t2 = torch.zeros(1 << 16), torch.zeros(1 << 16)
    r = c.iallreduce(t1, 400)
    try:
        c.iallreduce(t2, 400).wait()
    except pbox.Error as e:
        check_eq(e.code, pbox.EBUSY, f"the code of a second call on a busy key ({e})")
    r.wait()


def hook_keys():
    s = pbox.torch.State(c, name="m1")
    k1 = s.key(0, 1000, torch.float32)
    check_eq(s.key(0, 1000, torch.float32), k1, "the key of (0, 1000, float32) again")
    check(k1 != s.key(0, 1001, torch.float32), f"keys of 1000 and 1001 elements: expected "
          f"different, both {k1}")
    check(k1 != s.key(0, 1000, torch.float16), f"keys of float32 and float16: expected "
          f"different, both {k1}")
    check(k1 != pbox.torch.State(c, name="m2").key(0, 1000, torch.float32),
          f"keys of States m1 and m2: expected different, both {k1}")
    check(0 <= k1 < 2 ** 31, f"the key: expected in [0, 2**31), got {k1}")
    # a fixed value: every rank, every process, every run computes the same key
    check_eq(pbox.torch.key_for("ddp", 3, 12345, torch.float32),
             pbox.torch.key_for("ddp", 3, 12345, torch.float32),
             "key_for('ddp', 3, 12345, float32), computed twice")


def hook_profiler_span():
    """A hooked bucket is one pbox::bucket span in torch.profiler, and the
    collectives of the binding check their buffers before any I/O."""
    s = pbox.torch.State(c, name="prof")
    buf = torch.ones(1000)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fut = s.submit(buf, s.key(0, 1000, torch.float32), lambda: buf)
        fut.wait()
    s.close()
    check(any(e.name == "pbox::bucket" for e in prof.events()),
          "torch.profiler: expected a pbox::bucket span, found none")
    raises(pbox.EINVAL, lambda: c.broadcast(torch.ones(3), 77, root=1), "root")
    raises(pbox.EINVAL, lambda: c.allgather(torch.ones(3), torch.ones(4), 78), "world")
    raises(pbox.EINVAL, lambda: c.reduce_scatter(torch.ones(3), torch.ones(3, dtype=torch.float16), 79),
           "f32", "f16")
    out = torch.zeros(3)
    c.allgather(torch.tensor([1.0, -0.0, 3.0]), out, 80)   # world 1: a copy, bit for bit
    check_eq(out.tolist(), [1.0, -0.0, 3.0], "world-1 allgather")
    check_eq(str(out[1].item()), "-0.0", "world-1 allgather's element 1 (bit for bit)")
    c.barrier(81)


def closed():
    c2 = pbox.Client(CONTROL, job="pyargs2", rank=0, world=1)
    with c2:
        c2.allreduce(torch.ones(3), 1)
    check(c2.closed, "a client after its with block: expected closed, still open")
    raises(pbox.ECLOSED, lambda: c2.allreduce(torch.ones(3), 1), "closed")


for name, fn in [("world-1 round trip, all buffer types", roundtrip),
                 ("non-contiguous tensor/array", non_contiguous),
                 ("wrong dtype", wrong_dtype), ("empty, read-only, bad key", other_bad_buffers),
                 ("size mismatch on a key", size_mismatch),
                 ("iallreduce from threads", async_and_threads), ("busy key", busy_key),
                 ("hook key derivation", hook_keys),
                 ("profiler span, collectives' checks", hook_profiler_span),
                 ("closed client", closed)]:
    run(name, fn)
c.close()

npass = sum(1 for r in results if r[1])
nfail = len(results) - npass
print(f"pbox_py_args: {npass} passed, {nfail} failed")
sys.exit(1 if nfail else 0)
