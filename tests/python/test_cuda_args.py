#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_cuda_args.py - the Python side of CUDA tensors (pbox.Client's
iallreduce_cuda, the DDP hooks, the "pbox" backend) on a machine without a
GPU (make pycheck): what can be checked without a device or a box.

- CPU tensors take the same road as before: the hooks' CPU path divides
  the sum by the world (on a stub client), and device-only arguments given
  for a host buffer are refused by name.
- A CUDA tensor's call names what is missing: the GPU library ("no GPU
  library: ...", PBOX_GPU_LIB pointing nowhere), the device (the fake GPU
  library whose init says -ENODEV: "no CUDA device"), torch's CUDA stream
  (torch built without CUDA); with the fake library loaded and a stream
  given, the call reaches libpbox's pbox_iallreduce_dev (which refuses the
  unconnected client by name). The hooks' futures and the backend's Work
  fail with the same messages.

A "CUDA tensor" here is a CPU tensor whose .device says cuda:0 (a tensor
subclass): enough for the argument paths, never run on a device. Needs
torch (skipped with a message without it), the tree's build/libpbox.so and
build/tests/libpbox-gpu-fake.so. Prints one line per failure and a closing
"pycuda: N passed, M failed".
"""
import ctypes
import os
import socket
import sys
import threading
import traceback

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
FAKE = os.path.join(ROOT, os.environ.get("BUILD", "build"), "tests", "libpbox-gpu-fake.so")

try:
    import torch
except ImportError:
    torch = None

import pbox            # noqa: E402
from pbox import _lib  # noqa: E402
from checks import check, check_eq, check_in, check_raises  # noqa: E402  (tests/python/checks.py)


class Skip(Exception):
    pass


def _refused_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))          # bound, not listening: refused at once
    return s, s.getsockname()[1]


def unconnected(world=2):
    """A pbox.Client over a libpbox client whose connect was refused: it
    holds only its message, as pbox_connect leaves it. The GPU calls'
    checks run on it; anything needing the box fails by name."""
    L = _lib.load()
    sock, port = _refused_port()
    h = ctypes.c_void_p()
    rc = L.pbox_connect(f"127.0.0.1:{port}".encode(), b"cudaargs", 0, world, None,
                        ctypes.byref(h))
    sock.close()
    check(rc == pbox.ECONNECT and h.value, f"pbox_connect to a refused port: expected "
          f"ECONNECT ({pbox.ECONNECT}) and a client, got {rc} and handle {h.value}")
    c = pbox.Client.__new__(pbox.Client)
    c._L, c._lock = L, threading.Lock()
    c._idle, c._waiting, c._reqs, c._ps = threading.Condition(c._lock), 0, set(), {}
    c.control, c.job, c.rank, c.world = f"127.0.0.1:{port}", "cudaargs", 0, world
    c._handle = h
    return c


def fake_cuda(n=16, dtype=None):
    """A tensor that says it is on cuda:0 (CPU memory underneath)."""
    class FakeCuda(torch.Tensor):
        @property
        def device(self):
            return torch.device("cuda", 0)

        @property
        def is_cuda(self):
            return True
    return torch.arange(n, dtype=dtype or torch.float32).as_subclass(FakeCuda)


class Bucket:
    """What DDP hands a comm hook: the flat buffer and its index."""
    def __init__(self, buf, index=0):
        self._buf, self._index = buf, index

    def buffer(self):
        return self._buf

    def index(self):
        return self._index


def expect_error(fn, code, *words):
    """fn() raises pbox.Error of code whose message holds every word."""
    name = pbox.err_name(code)
    e = check_raises(pbox.Error, fn, what=f"a call that must fail with {name}")
    check(e.code == code, f"expected pbox.Error {name} ({code}), got {e.name} ({e.code}): "
          f"{e.message}")
    for w in words:
        check_in(w, e.message, f"the message of pbox.Error {e.name}")
    return e


def with_env(**kw):
    """Set (value str) or unset (None) environment variables; returns the
    old values for restore_env."""
    old = {k: os.environ.get(k) for k in kw}
    for k, v in kw.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    return old


restore_env = with_env


def need_torch():
    if torch is None:
        raise Skip("needs torch (/usr/bin/python3 has it)")


# ---- CPU: unchanged -----------------------------------------------------------

def test_cpu_tensor_buffer_info_unchanged():
    need_torch()
    t = torch.ones(10, dtype=torch.bfloat16)
    ptr, n, dt, what = pbox._buffer_info(t)
    check_eq((ptr, n, dt, what), (t.data_ptr(), 10, pbox.PBOX_BF16, "tensor"),
             "pbox._buffer_info(a CPU bfloat16 tensor of 10)")


def test_cpu_tensor_refuses_device_arguments():
    need_torch()
    c = unconnected()
    try:
        for kw in ({"scale": 0.5}, {"wire_dtype": "bf16"}, {"stream": 0}):
            expect_error(lambda: c.iallreduce(torch.ones(4), 1, **kw), pbox.EINVAL,
                         "apply to CUDA tensors only")
    finally:
        c.close()


def test_cpu_hook_path_unchanged():
    """allreduce_hook on a CPU bucket: iallreduce(buf, key) and the sum
    divided by the world in the future, as before."""
    need_torch()
    import pbox.torch as pt

    class Req:
        def wait(self):
            return None

    class Stub:
        world = 4
        calls = []

        def iallreduce(self, buf, key, **kw):
            check(not kw, f"expected no device arguments on the CPU road, got {kw}")
            buf.mul_(4)                 # "the sum of 4 equal ranks"
            self.calls.append((buf.device.type, key))
            return Req()

    st = pt.State(Stub(), name="cpu")
    buf = torch.full((8,), 2.0)
    out = pt.allreduce_hook(st, Bucket(buf)).wait()
    check(torch.equal(out, torch.full((8,), 2.0)),
          f"the CPU hook's result: expected 8 x 2.0 (the sum of 4, divided by 4), got {out}")
    check_eq(Stub.calls, [("cpu", pt.key_for("cpu", 0, 8, torch.float32))],
             "the stub's iallreduce calls (device, key)")
    st.close()


# ---- CUDA: named failures ---------------------------------------------------------

def test_cuda_tensor_no_gpu_library():
    need_torch()
    c = unconnected()
    old = with_env(PBOX_GPU_LIB="/nonexistent/libpbox-gpu.so.1")
    try:
        expect_error(lambda: c.iallreduce(fake_cuda(), 3), pbox.ENOTSUP,
                     "no GPU library: /nonexistent/libpbox-gpu.so.1: cannot open shared "
                     "object file", "make gpu")
        expect_error(c.gpu_init, pbox.ENOTSUP, "no GPU library")
    finally:
        restore_env(**old)
        c.close()


def test_cuda_tensor_no_device():
    need_torch()
    if not os.path.exists(FAKE):
        raise Skip(f"needs {FAKE} (make all)")
    c = unconnected()
    old = with_env(PBOX_GPU_LIB=FAKE, PBOX_FAKE_GPU_INIT="-19")
    try:
        expect_error(lambda: c.iallreduce(fake_cuda(), 3), pbox.ENOTSUP, "no CUDA device")
    finally:
        restore_env(**old)
        c.close()


def test_cuda_tensor_checked_before_the_library():
    need_torch()
    c = unconnected()
    try:
        expect_error(lambda: c.iallreduce_cuda(torch.ones(4), 3), pbox.EINVAL,
                     "takes a CUDA torch tensor")
        expect_error(lambda: c.iallreduce(fake_cuda(dtype=torch.float64), 3), pbox.EINVAL,
                     "torch.float64 is not supported")
        expect_error(lambda: c.iallreduce(fake_cuda(0), 3), pbox.EINVAL, "empty")
    finally:
        c.close()


def test_cuda_tensor_reaches_libpbox_with_the_fake():
    """The fake library loads (and stays loaded: the last test of it):
    without a stream, torch (no CUDA) cannot give one; with stream=0 the
    call reaches pbox_iallreduce_dev, which refuses the unconnected
    client by name."""
    need_torch()
    if not os.path.exists(FAKE):
        raise Skip(f"needs {FAKE} (make all)")
    c = unconnected()
    old = with_env(PBOX_GPU_LIB=FAKE, PBOX_FAKE_GPU_INIT=None)
    try:
        c.gpu_init()
        if not torch.cuda.is_available():
            expect_error(lambda: c.iallreduce(fake_cuda(), 3), pbox.ENOTSUP,
                         "torch cannot give its current CUDA stream")
        expect_error(lambda: c.iallreduce(fake_cuda(), 3, stream=0, scale=0.25,
                                          wire_dtype=torch.bfloat16),
                     pbox.EINVAL, "not connected")
        expect_error(lambda: c.iallreduce(fake_cuda(), 3, stream="s"), pbox.EINVAL,
                     "is not a torch.cuda.Stream")
        expect_error(lambda: c.iallreduce(fake_cuda(), 3, stream=0, wire_dtype="f64"),
                     pbox.EINVAL, "wire_dtype 'f64' is not supported")
        expect_error(lambda: c.iallreduce(fake_cuda(), 3, stream=0, gpudirect="sometimes"),
                     pbox.EINVAL, "gpudirect='sometimes'")
        expect_error(lambda: c.iallreduce(fake_cuda(), 3, stream=0, gpudirect="on"),
                     pbox.EINVAL, "not connected")
        # top-k of a CUDA tensor: selected on the device, float32 only
        expect_error(lambda: c.iallreduce_topk(fake_cuda(), 3, 0.1, stream=0, scale=0.5),
                     pbox.EINVAL, "not connected")
        expect_error(lambda: c.iallreduce_topk(fake_cuda(dtype=torch.float16), 3, stream=0),
                     pbox.EINVAL, "takes float32")
        expect_error(lambda: c.iallreduce_topk(torch.ones(4), 3, stream=0), pbox.EINVAL,
                     "apply to CUDA tensors only")
    finally:
        restore_env(**old)
        c.close()


def test_hooks_fail_naming_the_missing_gpu():
    need_torch()
    import pbox.torch as pt
    c = unconnected()
    old = with_env(PBOX_GPU_LIB="/nonexistent/libpbox-gpu.so.1")
    try:
        st = pt.State(c, name="cuda")
        for hook in (pt.allreduce_hook, pt.fp16_compress_hook, pt.bf16_compress_hook):
            try:
                hook(st, Bucket(fake_cuda())).wait()
            except Exception as e:   # the future's error carries pbox.Error's text
                check("no GPU library" in str(e) and "ENOTSUP" in str(e),
                      f"{hook.__name__}: expected ENOTSUP naming 'no GPU library', got: {e}")
            else:
                raise AssertionError(f"{hook.__name__} on a CUDA bucket without a GPU "
                                     "library succeeded")
        ts = pt.TopkState(c, name="cuda-topk")
        try:
            pt.topk_hook(ts, Bucket(fake_cuda())).wait()
        except Exception as e:   # selected on the device: needs the GPU library too
            check("no GPU library" in str(e) and "ENOTSUP" in str(e),
                  f"topk_hook: expected ENOTSUP naming 'no GPU library', got: {e}")
        else:
            raise AssertionError("topk_hook took a CUDA bucket")
        try:
            pt.allreduce_hook(st, Bucket(torch.ones(4, device="meta"))).wait()
        except Exception as e:
            check_in("take CPU and CUDA tensors", str(e), "allreduce_hook's error on a meta bucket")
        else:
            raise AssertionError("allreduce_hook took a meta bucket")
    finally:
        restore_env(**old)
        c.close()


def test_backend_allreduce_fails_naming_the_missing_gpu():
    need_torch()
    from torch._C._distributed_c10d import AllreduceOptions, ProcessGroup, ReduceOp
    from pbox.backend import ProcessGroupPBox, _boxable
    check(_boxable(fake_cuda(), cuda=True) and not _boxable(fake_cuda()),
          "_boxable(a CUDA tensor): expected true with cuda=True and false without")
    c = unconnected()
    old = with_env(PBOX_GPU_LIB="/nonexistent/libpbox-gpu.so.1")
    try:
        pg = ProcessGroupPBox.__new__(ProcessGroupPBox)
        ProcessGroup.__init__(pg, 0, 2)
        pg.client, pg.calls, pg._failed = c, {"box": 0, "gloo": 0}, None
        opts = AllreduceOptions()
        opts.reduceOp = ReduceOp.AVG
        t = fake_cuda()
        work = pg.allreduce([t], opts)
        check(work.is_completed(), "the Work of a CUDA allreduce without a GPU library: "
              "expected completed at once, it is not")
        try:
            work.get_future().wait()   # (torch 1.13's Work.wait() reports no error)
        except Exception as e:
            check_in("no GPU library", str(e), "the backend's allreduce error")
        else:
            raise AssertionError("the backend's allreduce of a CUDA tensor succeeded")
        # not silent for a synchronous caller either: the output is NaN and
        # the group stops (every later call raises the first error)
        check(torch.isnan(t.as_subclass(torch.Tensor)).all(),
              f"the failed allreduce's output: expected all NaN, got {t}")
        check(pg._failed and "no GPU library" in pg._failed,
              f"the group's first error: expected one naming 'no GPU library', got {pg._failed!r}")
        expect_error(lambda: pg.allreduce([fake_cuda()], opts), pbox.EABORTED,
                     "no GPU library", "stops at its first error")
    finally:
        restore_env(**old)
        c.close()


def run_tests(names, label):
    """Run every test_* function of the module namespace `names`; print a
    line per failure or skip and "label: N passed, M failed"; the exit
    status (1 if any failed)."""
    tests = [(n, f) for n, f in names.items() if n.startswith("test_") and callable(f)]
    passed = failed = skipped = 0
    for name, f in tests:
        try:
            f()
        except Skip as e:
            skipped += 1
            print(f"SKIP {name}: {e}")
            continue
        except Exception as e:  # noqa: BLE001 (report every kind of failure)
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}")
            traceback.print_exc(limit=4)
            continue
        passed += 1
    print(f"{label}: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


def main():
    return run_tests(globals(), "pycuda")


if __name__ == "__main__":
    sys.exit(main())
