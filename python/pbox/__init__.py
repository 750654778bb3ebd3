# SPDX-License-Identifier: BSD-3-Clause
"""pbox - Python binding of libpbox, the pbox gradient-aggregation client.

    import pbox
    with pbox.Client() as c:            # PBOX_CONTROL, RANK, WORLD_SIZE, job from env
        c.allreduce(tensor, key=0)      # in-place sum over all ranks

Buffers: contiguous CPU torch tensors (float32, float16, bfloat16) and
C-contiguous writeable numpy arrays (float32, float16; a numpy dtype named
'bfloat16', e.g. from ml_dtypes, maps to PBOX_BF16). Every failure raises
pbox.Error with the library's message (which job, rank, key) and its code.

CUDA tensors (allreduce only; include/pbox_cuda.h, docs/gpu.md): staged
through pinned host memory by libpbox's GPU library, ordered after the
tensor's current stream; wait() returns once the sum is ordered on that
stream (no host-side synchronisation):

    c.allreduce(grad_on_gpu, key=1, scale=1 / c.world)    # the mean

PS mode (the optimizer runs on the box; include/pbox.h "PS mode"):

    c.declare_optimizer(key, n, "f32", "sgd", lr=0.1, momentum=0.9)
    c.ps_init(key, weights if c.rank == 0 else None, weights)
    c.set_lr(key, 0.05)                 # optional, local: travels in each push
    c.push_pull(key, grads, weights)    # gradients out, updated weights back

For PyTorch DDP, see pbox.torch (allreduce_hook, fp16/bf16_compress_hook);
for PS mode in PyTorch, pbox.torch.BoxOptimizer.
"""
import contextlib
import ctypes
import re
import sys
import threading

from . import _env, _lib
from ._lib import PBOX_F32, PBOX_F16, PBOX_BF16

# The libpbox version this package is written for (pbox/_lib.py; the load
# check compares it with the library's pbox_version()).
__version__ = _lib.__version__

__all__ = ["Client", "Request", "Error", "PBOX_F32", "PBOX_F16", "PBOX_BF16",
           "strerror", "err_name", "library_path", "library_version"]

# Error codes (include/pbox.h; tests/python/test_abi.py compares them)
OK = 0
EINVAL = -1
ENOMEM = -2
ECONNECT = -3
EPROTO = -4
EREJECTED = -5
ETIMEDOUT = -6
EABORTED = -7
EBUSY = -8
ECLOSED = -9
ESYS = -10
ENOTSUP = -11
EPERM = -12
EAGAIN = -13

# Ranks of one host in a hierarchical top-k group, at most (include/pbox.h)
PBOX_TOPK_LOCAL_MAX = 64

_MAX_KEY = 0xFFFFFFFF


class Error(RuntimeError):
    """A pbox failure. .code is the negative PBOX_E* code, .name its name
    (err_name: e.g. 'ETIMEDOUT'), .message the detailed message."""

    def __init__(self, code, message):
        self.code = int(code)
        try:
            self.name = err_name(self.code)
        except OSError:     # no library to ask (it failed to load)
            self.name = str(self.code)
        self.message = message
        super().__init__(f"pbox: {message} [{self.name}]")


def strerror(code):
    """Static text naming an error code."""
    s = _lib.load().pbox_strerror(int(code))
    return s.decode() if s else f"error {code}"


def err_name(code):
    """The name of an error code as the library gives it (pbox_err_name)
    without its PBOX_ prefix, as the module's constants are named:
    'ETIMEDOUT' for pbox.ETIMEDOUT; for a value that is no code (the
    library's "PBOX_E?"), the number as text."""
    s = (_lib.load().pbox_err_name(int(code)) or b"").decode()
    return s[len("PBOX_"):] if re.fullmatch(r"PBOX_[A-Z0-9_]+", s) else str(int(code))


def library_path():
    """Where libpbox was loaded from."""
    return _lib.path()


def library_version():
    """The loaded libpbox's version, "MAJOR.MINOR.PATCH" (pbox_version_string;
    pbox.__version__ is the one this package was written for)."""
    return _lib.load().pbox_version_string().decode()


def _env_int(name):
    try:
        return _env.integer(name)
    except ValueError as e:
        raise Error(EINVAL, str(e)) from None


def _int_arg(name, v):
    """int(v) for an integer argument, or Error(EINVAL) naming it."""
    try:
        return int(v)
    except (TypeError, ValueError):
        raise Error(EINVAL, f"{name}={v!r} is not an integer") from None


def _default_job():
    for name in ("PBOX_JOB", "TORCHELASTIC_RUN_ID"):
        v = _env.text(name)
        if v:
            # job names are 1-63 of [A-Za-z0-9._-]; make a run id fit
            return re.sub(r"[^A-Za-z0-9._-]", "-", v)[:63]
    return None


def _buffer_info(buf, writable=True):
    """(address, element count, pbox dtype, what) for a supported buffer, or
    raise Error(EINVAL) saying what is wrong. writable=False for buffers
    the library only reads (a PS key's gradients or initial weights)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(buf, torch.Tensor):
        dt = {torch.float32: PBOX_F32, torch.float16: PBOX_F16,
              torch.bfloat16: PBOX_BF16}.get(buf.dtype)
        if dt is None:
            raise Error(EINVAL, f"tensor dtype {buf.dtype} is not supported "
                                "(use torch.float32, torch.float16 or torch.bfloat16)")
        if buf.device.type != "cpu":
            raise Error(EINVAL, f"tensor is on {buf.device}; this call takes CPU tensors "
                                "(Client.allreduce/iallreduce also take CUDA tensors; the "
                                "other calls need a CPU copy)")
        if buf.is_sparse or buf.layout != torch.strided:
            raise Error(EINVAL, f"tensor layout {buf.layout} is not supported here (dense "
                                "only): sum a sparse COO tensor with "
                                "pbox.torch.sparse_allreduce or Client.allreduce_sparse")
        if not buf.is_contiguous():
            raise Error(EINVAL, "tensor is not contiguous (pass t.contiguous() and copy the "
                                "result back, or use a contiguous buffer)")
        if buf.numel() == 0:
            raise Error(EINVAL, "tensor is empty")
        return buf.data_ptr(), buf.numel(), dt, "tensor"
    np = sys.modules.get("numpy")
    if np is not None and isinstance(buf, np.ndarray):
        name = buf.dtype.name
        dt = {"float32": PBOX_F32, "float16": PBOX_F16, "bfloat16": PBOX_BF16}.get(name)
        if dt is None or not buf.dtype.isnative:
            raise Error(EINVAL, f"array dtype {buf.dtype} is not supported "
                                "(use native float32 or float16)")
        if not buf.flags.c_contiguous:
            raise Error(EINVAL, "array is not C-contiguous (use np.ascontiguousarray and "
                                "copy the result back)")
        if writable and not buf.flags.writeable:
            raise Error(EINVAL, "array is read-only (the result is written into it)")
        if buf.size == 0:
            raise Error(EINVAL, "array is empty")
        return buf.ctypes.data, buf.size, dt, "array"
    raise Error(EINVAL, f"cannot use a {type(buf).__module__}.{type(buf).__name__} as a "
                        "buffer: pass a torch tensor or a numpy array")


def _on_stream(stream):
    """torch.cuda.stream(stream), or nothing for CPU work (stream None)."""
    if stream is None:
        return contextlib.nullcontext()
    return sys.modules["torch"].cuda.stream(stream)


def _cuda_stream(tensor):
    """torch.cuda.current_stream(tensor.device), or Error(ENOTSUP) saying
    why torch cannot give it (e.g. torch built without CUDA)."""
    torch = sys.modules.get("torch")
    try:
        return torch.cuda.current_stream(tensor.device)
    except (AssertionError, RuntimeError) as e:
        raise Error(ENOTSUP, f"tensor on {tensor.device}: torch cannot give its current CUDA "
                             f"stream ({e})") from None


def _stream_handle(tensor, stream):
    """The cudaStream_t (an int, 0: the legacy default stream) of stream:
    an int, an object with .cuda_stream (torch.cuda.Stream), or None for
    torch.cuda.current_stream(tensor.device)."""
    if stream is None:
        stream = _cuda_stream(tensor)
    handle = getattr(stream, "cuda_stream", stream)
    if isinstance(handle, bool) or not isinstance(handle, int) or handle < 0:
        raise Error(EINVAL, f"stream {stream!r} is not a torch.cuda.Stream or a cudaStream_t "
                            "handle (int)")
    return handle


def _uint32_indices(indices, count):
    """indices (a torch tensor, numpy array or sequence of ints) as a
    contiguous numpy uint32 array, checked: 1-D, strictly increasing,
    below count."""
    import numpy as np
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(indices, torch.Tensor):
        indices = indices.detach().cpu().numpy()
    a = np.asarray(indices)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise Error(EINVAL, f"indices must be a 1-D array of ints, not {a.dtype} of shape "
                            f"{a.shape}")
    if a.size:
        if int(a.min()) < 0 or int(a.max()) >= count:
            raise Error(EINVAL, f"indices must lie in [0, {count}): found {int(a.min())}.."
                                f"{int(a.max())}")
        if a.size > 1 and not bool((a[1:] > a[:-1]).all()):
            raise Error(EINVAL, "indices must increase strictly (sorted, no repeats)")
    return np.ascontiguousarray(a, dtype=np.uint32)


def _check_key(key):
    if isinstance(key, bool) or not isinstance(key, int):
        raise Error(EINVAL, f"key must be an int, not {type(key).__name__}")
    if key < 0 or key > _MAX_KEY:
        raise Error(EINVAL, f"key {key} is out of range (0..{_MAX_KEY})")
    return key


_DTYPE_CODES = {"f32": PBOX_F32, "float32": PBOX_F32, "f16": PBOX_F16, "float16": PBOX_F16,
                "bf16": PBOX_BF16, "bfloat16": PBOX_BF16}
_DTYPE_NAMES = {PBOX_F32: "f32", PBOX_F16: "f16", PBOX_BF16: "bf16"}


def _dtype_code(dtype, what="dtype"):
    """PBOX_F32/F16/BF16 from a code, a name ("f32", "bfloat16", ...) or a
    torch dtype; Error(EINVAL) otherwise."""
    if isinstance(dtype, int) and not isinstance(dtype, bool) and dtype in _DTYPE_NAMES:
        return dtype
    name = dtype if isinstance(dtype, str) else str(dtype).replace("torch.", "")
    code = _DTYPE_CODES.get(name)
    if code is None:
        raise Error(EINVAL, f"{what} {dtype!r} is not supported (f32, f16 or bf16)")
    return code


def _ps_part(part):
    if isinstance(part, int) and not isinstance(part, bool) and part in _lib.PS_PARTS.values():
        return part
    code = _lib.PS_PARTS.get(part) if isinstance(part, str) else None
    if code is None:
        raise Error(EINVAL, f"part {part!r}: use 'weights', 'state0' (SGD momentum, Adam "
                            "exp_avg) or 'state1' (Adam exp_avg_sq)")
    return code


def _num(name, v):
    """float(v) for a hyperparameter, or Error(EINVAL) naming it."""
    if isinstance(v, bool):
        raise Error(EINVAL, f"{name}={v!r} is not a number")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise Error(EINVAL, f"{name}={v!r} is not a number")


class _PsKey:
    """What a Client knows of a PS key it declared: the sizes and dtypes
    its buffers must have (the library cannot check a weights_out it is
    given no count for)."""
    __slots__ = ("count", "dtype", "wdtype", "kind", "inited")

    def __init__(self, count, dtype, wdtype, kind):
        self.count, self.dtype, self.wdtype, self.kind = count, dtype, wdtype, kind
        self.inited = False    # ps_init succeeded: pushes may follow


class Request:
    """An allreduce (Client.iallreduce) or a PS step (Client.ipush_pull) in
    flight. Its buffers must stay untouched until wait() returns; the
    Request keeps them alive."""

    __slots__ = ("_client", "_handle", "_buf", "_keep", "_key", "_done", "_err", "_inwait",
                 "_closed")

    # State, changed under the client's lock only: _handle is the library's
    # request until a wait() takes it (_inwait) or close() abandons it
    # (_closed); _done once its outcome is known (_err set first: the
    # unlocked fast path reads _done, then _err).

    def __init__(self, client, handle, buf, key, keep=None):
        self._client = client
        self._handle = handle
        self._buf = buf        # what wait() returns: the result's buffer
        self._keep = keep      # another buffer the library reads meanwhile
        self._key = key
        self._done = False
        self._err = None       # the failure, raised by every wait()
        self._inwait = False   # a thread is in pbox_wait for it
        self._closed = False   # close() abandoned it before any wait()

    @property
    def key(self):
        return self._key

    def test(self):
        """True if finished (wait() then returns at once)."""
        if self._done:
            return True
        with self._client._lock:
            if self._done or self._closed:   # closed: wait() raises at once
                return True
            if self._inwait:
                return False
            return bool(self._client._L.pbox_test(self._handle))

    def _outcome(self):
        if self._err is not None:
            raise self._err
        return self._buf

    def wait(self):
        """Block until the result is in the buffer (the sum; a PS step's
        weights); return that buffer. Raises Error on failure. Calling it
        again returns at once: the buffer, or the same Error. A second
        thread calling it while another is inside gets Error(EBUSY); one
        calling it after the client was closed without a wait() gets
        Error(ECLOSED)."""
        if self._done:
            return self._outcome()
        c = self._client
        with c._lock:
            if self._done:             # another thread's wait() ended meanwhile
                return self._outcome()
            if self._closed:
                self._err = Error(ECLOSED, f"key {self._key}: the client was closed before "
                                           "the request was waited for")
                self._done = True
                raise self._err
            if self._inwait:
                raise Error(EBUSY, f"key {self._key}: another thread is waiting for this "
                                   "request")
            h, self._handle = self._handle, None
            self._inwait = True
            c._waiting += 1
        rc, msg = None, None
        try:
            rc = c._L.pbox_wait(h)     # releases the GIL
            msg = c._last_error() if rc < 0 else None
        finally:
            with c._lock:
                if rc is None:         # interrupted: the outcome is unknown
                    self._err = Error(EABORTED, f"key {self._key}: wait() was interrupted")
                elif rc < 0:
                    self._err = Error(rc, msg or strerror(rc))
                self._keep = None
                self._done = True
                self._inwait = False
                c._waiting -= 1
                c._reqs.discard(self)
                c._idle.notify_all()
        return self._outcome()


class Client:
    """A worker's connection to a pbox job.

    Client(control=None, job=None, rank=None, world=None, timeout_ms=0,
           rto_ms=0, window=0, mtu=0, udp_offload=0, join_secret=None,
           transport=None, busy_poll=0, job_bytes=0, key_bytes=0, nonfinite=None,
           local_rank=0, local_world=0)

    control: "host:port" of the box's control endpoint; default $PBOX_CONTROL.
    job:     job name (1-63 of [A-Za-z0-9._-]); default $PBOX_JOB, then
             torchrun's $TORCHELASTIC_RUN_ID.
    rank, world: default torchrun's $RANK and $WORLD_SIZE.
    The other arguments are pbox_opts (0 = library default); join_secret
    (str or bytes) defaults to $PBOX_JOIN_SECRET, read by the library;
    transport ("auto", "udp", "xdp", "verbs") defaults to $PBOX_TRANSPORT,
    then auto (see .transport_info). job_bytes: the job memory to reserve on
    the box if this worker creates the job (default $PBOX_JOB_BYTES, then
    the box's --job-bytes). key_bytes (when job_bytes is not given): size
    the job as the box's engine memory plus this many bytes for keys
    (pbox.torch.key_bytes_for(model) estimates them). nonfinite ("abort",
    "skip", "pass"): what the box does with a PS round whose gradient sum
    holds a NaN or Inf, if this worker creates the job (default
    $PBOX_NONFINITE, read by the library, then "abort"); under "skip"
    stats()["ps_skipped"] counts the segments not stepped. local_rank,
    local_world: host-local aggregation (docs/architecture.md "The host
    level"): this rank's place among the local_world ranks of its host;
    local_world 1 turns it off, 0 (default) takes torchrun's LOCAL_RANK and
    LOCAL_WORLD_SIZE, read by the library (on when above 1, unless
    PBOX_HOST_LOCAL=0).
    """

    def __init__(self, control=None, job=None, rank=None, world=None, *, timeout_ms=0,
                 rto_ms=0, window=0, mtu=0, udp_offload=0, join_secret=None,
                 transport=None, busy_poll=0, job_bytes=0, key_bytes=0, nonfinite=None,
                 local_rank=0, local_world=0):
        self._handle = None
        L = _lib.load()
        self._L = L
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._waiting = 0
        self._reqs = set()
        self._ps = {}          # key -> _PsKey, the PS keys declared on this client
        if control is None:
            control = _env.text("PBOX_CONTROL")
        if job is None:
            job = _default_job()
        if rank is None:
            rank = _env_int("RANK")
        if world is None:
            world = _env_int("WORLD_SIZE")
        if control is None:
            raise Error(EINVAL, "no control address: pass control='host:port' or set "
                                "PBOX_CONTROL")
        if job is None:
            raise Error(EINVAL, "no job name: pass job=... or set PBOX_JOB (under torchrun "
                                "TORCHELASTIC_RUN_ID is used)")
        if rank is None or world is None:
            raise Error(EINVAL, "rank and world unknown: pass rank= and world= or run under "
                                "torchrun (RANK, WORLD_SIZE)")
        self.control, self.job = str(control), str(job)
        self.rank, self.world = _int_arg("rank", rank), _int_arg("world", world)
        opts = _lib.Opts()
        rc = L.pbox_opts_init_sized(ctypes.byref(opts), ctypes.sizeof(opts))
        if rc < 0:
            raise Error(rc, f"pbox_opts_init_sized refused {ctypes.sizeof(opts)} bytes")
        for name, v in (("timeout_ms", timeout_ms), ("rto_ms", rto_ms), ("window", window),
                        ("mtu", mtu), ("udp_offload", udp_offload),
                        ("busy_poll", busy_poll), ("job_bytes", job_bytes),
                        ("key_bytes", key_bytes)):
            if v:
                v = _int_arg(name, v)
                if not 0 < v < (2 ** 62 if name.endswith("_bytes") else 2 ** 32):
                    raise Error(EINVAL, f"{name}={v} is out of range")
                setattr(opts, name, v)
        if transport is not None:
            if transport not in _lib.TRANSPORTS:
                raise Error(EINVAL, f"transport={transport!r}: use one of "
                                    f"{', '.join(_lib.TRANSPORTS)}")
            opts.transport = _lib.TRANSPORTS[transport]
        if nonfinite is not None:
            if nonfinite not in _lib.NONFINITE:
                raise Error(EINVAL, f"nonfinite={nonfinite!r}: use one of "
                                    f"{', '.join(_lib.NONFINITE)}")
            opts.nonfinite = _lib.NONFINITE[nonfinite]
        if local_world or local_rank:
            lr, lw = _int_arg("local_rank", local_rank), _int_arg("local_world", local_world)
            if not (lw == 1 or 0 <= lr < lw <= 64):
                raise Error(EINVAL, f"local_rank={lr}, local_world={lw}: need 0 <= "
                                    f"local_rank < local_world <= 64 (local_world=1: off)")
            opts.local_rank, opts.local_world = lr, lw
        if join_secret:
            secret = join_secret.encode() if isinstance(join_secret, str) else bytes(join_secret)
            if not 0 < len(secret) <= 256 or b"\0" in secret:
                raise Error(EINVAL, "join_secret must be 1..256 bytes without NUL")
            opts.join_secret = secret   # kept alive by `secret` until connect returns
        h = ctypes.c_void_p()
        rc = L.pbox_connect(self.control.encode(), self.job.encode(), self.rank, self.world,
                            ctypes.byref(opts), ctypes.byref(h))
        if rc < 0:
            msg = None
            if h.value:
                m = L.pbox_last_error(h)
                msg = m.decode(errors="replace") if m else None
                L.pbox_close(h)
            raise Error(rc, msg or strerror(rc))
        self._handle = h

    # -- internals --------------------------------------------------------
    def _last_error(self):
        h = self._handle
        if h is None:
            return ""
        m = self._L.pbox_last_error(h)
        return m.decode(errors="replace") if m else ""

    def _live(self):
        if self._handle is None:
            raise Error(ECLOSED, f"job '{self.job}' rank {self.rank}: the client is closed")
        return self._handle

    def _blocking(self, fn, *args):
        """fn(handle, *args), a library call that blocks (the GIL is
        released), counted as a waiter so close() waits for it; raise
        Error if it fails."""
        with self._lock:
            h = self._live()
            self._waiting += 1
        try:
            rc = fn(h, *args)
            msg = self._last_error() if rc < 0 else None
        finally:
            with self._lock:
                self._waiting -= 1
                self._idle.notify_all()
        if rc < 0:
            raise Error(rc, msg or strerror(rc))

    # -- API --------------------------------------------------------------
    def iallreduce(self, buf, key, *, scale=None, wire_dtype=None, stream=None,
                   gpudirect=None):
        """Start an in-place sum of buf over all ranks under `key`; return a
        Request. Every rank must use the same key with the same size and
        dtype; calls on one key must not overlap. A CUDA tensor goes to
        iallreduce_cuda (with scale, wire_dtype, stream and gpudirect); for
        host buffers those must be left out."""
        _check_key(key)
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(buf, torch.Tensor) and buf.device.type == "cuda":
            return self.iallreduce_cuda(buf, key, scale=1.0 if scale is None else scale,
                                        wire_dtype=wire_dtype, stream=stream,
                                        gpudirect=gpudirect)
        if (scale is not None or wire_dtype is not None or stream is not None or
                gpudirect is not None):
            raise Error(EINVAL, f"key {key}: scale, wire_dtype, stream and gpudirect apply "
                                "to CUDA tensors only (this buffer is in host memory)")
        ptr, count, dt, _ = _buffer_info(buf)
        req = ctypes.c_void_p()
        with self._lock:
            h = self._live()
            rc = self._L.pbox_iallreduce(h, key, ptr, count, dt, ctypes.byref(req))
            if rc < 0:
                raise Error(rc, self._last_error() or strerror(rc))
            r = Request(self, req, buf, key)
            self._reqs.add(r)
        return r

    def allreduce(self, buf, key, **kw):
        """Sum buf over all ranks in place under `key`; return buf. For a
        CUDA tensor, wait() returns once the sum is ordered on its stream
        (iallreduce_cuda)."""
        return self.iallreduce(buf, key, **kw).wait()

    # -- CUDA tensors (include/pbox_cuda.h, docs/gpu.md) --------------------
    def gpu_init(self):
        """Load and initialise libpbox's GPU library now ($PBOX_GPU_LIB, else
        libpbox-gpu.so.1); the first CUDA call does otherwise. Raises
        Error(ENOTSUP) naming what is missing (the library, a CUDA driver,
        a device)."""
        with self._lock:
            rc = self._L.pbox_gpu_init(self._live())
            if rc < 0:
                raise Error(rc, self._last_error() or strerror(rc))

    def iallreduce_cuda(self, tensor, key, *, scale=1.0, wire_dtype=None, stream=None,
                        gpudirect=None):
        """Start the in-place sum of a CUDA tensor over all ranks under `key`
        (pbox_iallreduce_dev); return a Request whose wait() returns the
        tensor once the sum is ordered on `stream`: work enqueued there
        afterwards sees it, the host after synchronising it.

        scale:      the sum times scale lands in the tensor (1 / world: the
                    mean), fused into the copy back.
        wire_dtype: dtype on the wire and on the box ("f32", "f16", "bf16"
                    or a torch dtype; default the tensor's), cast on the
                    device-to-host copy.
        stream:     a torch.cuda.Stream or a cudaStream_t as an int; default
                    torch.cuda.current_stream(tensor.device). The call
                    waits, on the GPU, for the work enqueued on it before.
        gpudirect:  "off", "auto" or "on" (docs/gpu.md "GPUDirect RDMA"):
                    whether the NIC reads the tensor itself (the verbs
                    transport); default the environment's PBOX_GPUDIRECT,
                    else "auto".
        """
        _check_key(key)
        gd = {None: -1, "off": 0, "auto": 1, "on": 2}.get(gpudirect)
        if gd is None:
            raise Error(EINVAL, f"key {key}: gpudirect={gpudirect!r} (use 'off', 'auto' or 'on')")
        ptr, count, dt = self._cuda_tensor(tensor)
        self.gpu_init()
        wdt = -1 if wire_dtype is None else _dtype_code(wire_dtype, "wire_dtype")
        s = _stream_handle(tensor, stream)
        o = _lib.DevOpts()
        rc = self._L.pbox_dev_opts_init_sized(ctypes.byref(o), ctypes.sizeof(o))
        if rc < 0:
            raise Error(rc, f"pbox_dev_opts_init_sized refused {ctypes.sizeof(o)} bytes")
        o.wire_dtype, o.scale, o.gpudirect = wdt, _num("scale", scale), gd
        req = ctypes.c_void_p()
        with self._lock:
            h = self._live()
            rc = self._L.pbox_iallreduce_dev(h, key, ptr, count, dt, s, ctypes.byref(o),
                                             ctypes.byref(req))
            if rc < 0:
                raise Error(rc, self._last_error() or strerror(rc))
            r = Request(self, req, tensor, key)
            self._reqs.add(r)
        return r

    @staticmethod
    def _cuda_tensor(t):
        """(address, count, pbox dtype) of a dense contiguous CUDA tensor of
        a supported dtype, or Error(EINVAL) saying what is wrong."""
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(t, torch.Tensor) or t.device.type != "cuda":
            raise Error(EINVAL, f"iallreduce_cuda takes a CUDA torch tensor, not "
                                f"{getattr(t, 'device', type(t).__name__)}")
        dt = {torch.float32: PBOX_F32, torch.float16: PBOX_F16,
              torch.bfloat16: PBOX_BF16}.get(t.dtype)
        if dt is None:
            raise Error(EINVAL, f"tensor dtype {t.dtype} is not supported "
                                "(use torch.float32, torch.float16 or torch.bfloat16)")
        if t.layout != torch.strided or not t.is_contiguous():
            raise Error(EINVAL, "CUDA tensor is not dense and contiguous (pass "
                                "t.contiguous() and copy the result back)")
        if t.numel() == 0:
            raise Error(EINVAL, "tensor is empty")
        return t.data_ptr(), t.numel(), dt

    # -- collectives (include/pbox.h; docs/protocol.md "Collective keys") ---
    def _start(self, buf, key, fn, *args, keep=None):
        """fn(handle, key, *args, &req) started under the lock: a Request
        returning buf, keeping `keep` alive too."""
        req = ctypes.c_void_p()
        with self._lock:
            h = self._live()
            rc = fn(h, key, *args, ctypes.byref(req))
            if rc < 0:
                raise Error(rc, self._last_error() or strerror(rc))
            r = Request(self, req, buf, key, keep)
            self._reqs.add(r)
        return r

    def ibroadcast(self, buf, key, root):
        """Start a broadcast of root's buf into every rank's buf (in place,
        bit for bit) under `key`; return a Request. A key serves one
        collective (and one root) for the client's life."""
        _check_key(key)
        if not isinstance(root, int) or not 0 <= root < self.world:
            raise Error(EINVAL, f"broadcast root {root!r} is not a rank of the job "
                                f"(world {self.world})")
        ptr, count, dt, _ = _buffer_info(buf)
        return self._start(buf, key, self._L.pbox_ibroadcast, ptr, count, dt, root)

    def broadcast(self, buf, key, root):
        """ibroadcast(...).wait(); returns buf."""
        return self.ibroadcast(buf, key, root).wait()

    def _sliced(self, small, big, what):
        """(small's pointer, big's pointer, per-rank count, dtype) for an
        allgather (small in, big out) or a reduce_scatter (big in, small
        out): big must hold world times small's elements of its dtype."""
        sptr, n, dt, _ = _buffer_info(small, writable=(what == "reduce_scatter"))
        bptr, nb, bdt, _ = _buffer_info(big, writable=(what == "allgather"))
        if bdt != dt:
            raise Error(EINVAL, f"{what}: the buffers are {_DTYPE_NAMES[dt]} and "
                                f"{_DTYPE_NAMES[bdt]}")
        if nb != n * self.world:
            raise Error(EINVAL, f"{what}: the large buffer has {nb} elements, world "
                                f"{self.world} x {n} = {n * self.world} needed")
        return sptr, bptr, n, dt

    def iallgather(self, inp, out, key):
        """Start an allgather under `key`: every rank's inp (n elements) into
        out (world * n, rank r's at r * n), bit for bit; return a Request
        whose wait() returns out."""
        _check_key(key)
        iptr, optr, n, dt = self._sliced(inp, out, "allgather")
        return self._start(out, key, self._L.pbox_iallgather, iptr, optr, n, dt, keep=inp)

    def allgather(self, inp, out, key):
        """iallgather(...).wait(); returns out."""
        return self.iallgather(inp, out, key).wait()

    def ireduce_scatter(self, inp, out, key):
        """Start a reduce-scatter under `key`: inp holds world * n elements,
        out (n) gets this rank's slice of the sum over all ranks; return a
        Request whose wait() returns out."""
        _check_key(key)
        optr, iptr, n, dt = self._sliced(out, inp, "reduce_scatter")
        return self._start(out, key, self._L.pbox_ireduce_scatter, iptr, optr, n, dt,
                           keep=inp)

    def reduce_scatter(self, inp, out, key):
        """ireduce_scatter(...).wait(); returns out."""
        return self.ireduce_scatter(inp, out, key).wait()

    def barrier(self, key):
        """Return when every rank has called barrier(key) (a one-element sum;
        the key then serves barriers only)."""
        _check_key(key)
        self._blocking(self._L.pbox_barrier, key)

    def release(self, keys):
        """Give back keys (an int or an iterable of 1 to 1024 ints) this rank
        will not use again, so the box can free their memory. Collective:
        a key goes once every rank has released it; a key's next use
        declares it afresh. Raises Error (EBUSY while a call on one of them
        is in flight)."""
        ks = [keys] if isinstance(keys, int) else [int(k) for k in keys]
        for k in ks:
            _check_key(k)
        arr = (ctypes.c_uint32 * len(ks))(*ks)
        self._blocking(self._L.pbox_release_keys, arr, len(ks))

    # -- sparse keys (include/pbox.h "Sparse keys") -------------------------
    def _topk_opts(self, density, error_feedback, momentum, local=None):
        density, momentum = _num("density", density), _num("momentum", momentum)
        if not 0 < density <= 1:
            raise Error(EINVAL, f"density {density} is outside (0, 1]")
        if not 0 <= momentum < 1:
            raise Error(EINVAL, f"momentum {momentum} is outside [0, 1)")
        o = _lib.TopkOpts()
        rc = self._L.pbox_topk_opts_init_sized(ctypes.byref(o), ctypes.sizeof(o))
        if rc < 0:
            raise Error(rc, f"pbox_topk_opts_init_sized refused {ctypes.sizeof(o)} bytes")
        o.density, o.momentum, o.error_feedback = density, momentum, int(bool(error_feedback))
        if local is not None:
            try:
                lr, ls = (int(v) for v in local)
            except (TypeError, ValueError):
                raise Error(EINVAL, f"local must be (local_rank, local_size), not {local!r}")
            if not 0 <= lr < ls <= PBOX_TOPK_LOCAL_MAX:
                raise Error(EINVAL, f"local=({lr}, {ls}): need 0 <= local_rank < local_size "
                                    f"<= {PBOX_TOPK_LOCAL_MAX}")
            o.local_rank, o.local_size = lr, ls
        return o

    def iallreduce_topk(self, buf, key, density=0.01, *, error_feedback=True, momentum=0.0,
                        scale=None, stream=None, local=None):
        """Start a top-k sparse allreduce of buf (float32/16, in place) under
        `key`: about density * numel entries of buf + the key's residual
        are sent (the rest kept for the next call when error_feedback),
        and buf gets the dense sum over all ranks. Return a Request.
        momentum > 0: momentum correction (Deep Gradient Compression).
        local=(local_rank, local_size): hierarchical top-k, the ranks of
        this host (consecutive, local rank 0 first) sum through shared
        memory and local rank 0 alone selects and sends (host buffers).
        A CUDA tensor goes to iallreduce_topk_cuda (with scale and
        stream); for host buffers those must be left out."""
        _check_key(key)
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(buf, torch.Tensor) and buf.device.type == "cuda":
            if local is not None:
                raise Error(EINVAL, f"key {key}: hierarchical top-k (local=) takes host "
                                    "buffers (the host group sums in host memory)")
            return self.iallreduce_topk_cuda(buf, key, density, error_feedback=error_feedback,
                                             momentum=momentum,
                                             scale=1.0 if scale is None else scale,
                                             stream=stream)
        if scale is not None or stream is not None:
            raise Error(EINVAL, f"key {key}: scale and stream apply to CUDA tensors only "
                                "(this buffer is in host memory)")
        o = self._topk_opts(density, error_feedback, momentum, local)
        ptr, count, dt, _ = _buffer_info(buf)
        req = ctypes.c_void_p()
        with self._lock:
            h = self._live()
            rc = self._L.pbox_iallreduce_topk(h, key, ptr, count, dt, ctypes.byref(o),
                                              ctypes.byref(req))
            if rc < 0:
                raise Error(rc, self._last_error() or strerror(rc))
            r = Request(self, req, buf, key)
            self._reqs.add(r)
        return r

    def iallreduce_topk_cuda(self, tensor, key, density=0.01, *, error_feedback=True,
                             momentum=0.0, scale=1.0, stream=None):
        """Top-k sparse allreduce of a float32 CUDA tensor, in place
        (pbox_iallreduce_topk_dev, docs/gpu.md "Top-k on the device"): the
        selection (gradient + the key's residual, kept on the device) runs
        on `stream` and this call returns once it is done; the dense sum
        times `scale` comes back into the tensor, ordered on `stream` when
        the Request's wait() returns. error_feedback must stay on and
        momentum 0 on the device."""
        _check_key(key)
        o = self._topk_opts(density, error_feedback, momentum)
        ptr, count, dt = self._cuda_tensor(tensor)
        if dt != PBOX_F32:
            raise Error(EINVAL, f"key {key}: top-k of CUDA tensors takes float32 (this one is "
                                f"{tensor.dtype})")
        self.gpu_init()
        s = _stream_handle(tensor, stream)
        d = _lib.DevOpts()
        rc = self._L.pbox_dev_opts_init_sized(ctypes.byref(d), ctypes.sizeof(d))
        if rc < 0:
            raise Error(rc, f"pbox_dev_opts_init_sized refused {ctypes.sizeof(d)} bytes")
        d.scale = _num("scale", scale)
        req = ctypes.c_void_p()
        with self._lock:
            h = self._live()
            rc = self._L.pbox_iallreduce_topk_dev(h, key, ptr, count, s, ctypes.byref(o),
                                                  ctypes.byref(d), ctypes.byref(req))
            if rc < 0:
                raise Error(rc, self._last_error() or strerror(rc))
            r = Request(self, req, tensor, key)
            self._reqs.add(r)
        return r

    def allreduce_topk(self, buf, key, density=0.01, **kw):
        """iallreduce_topk(...).wait(): buf holds the dense sum; returns buf."""
        return self.iallreduce_topk(buf, key, density, **kw).wait()

    def iallreduce_sparse(self, indices, values, out, key):
        """Start a sparse allreduce of index/value pairs under `key`: indices
        (ints, strictly increasing, below out's size), values (out's dtype,
        as many); out (a dense buffer) gets the sum over all ranks. The
        pairs are copied before this returns. Return a Request."""
        _check_key(key)
        optr, count, dt, _ = _buffer_info(out)
        idx = _uint32_indices(indices, count)
        if len(idx) == 0:
            vptr = None
        else:
            vptr, nv, vdt, _ = _buffer_info(values, writable=False)
            if nv != len(idx):
                raise Error(EINVAL, f"{len(idx)} indices but {nv} values")
            if vdt != dt:
                raise Error(EINVAL, f"values are {_DTYPE_NAMES[vdt]}, out is {_DTYPE_NAMES[dt]}")
        req = ctypes.c_void_p()
        with self._lock:
            h = self._live()
            rc = self._L.pbox_iallreduce_sparse(h, key, count, dt, idx.ctypes.data if len(idx)
                                                else None, vptr, len(idx), optr,
                                                ctypes.byref(req))
            if rc < 0:
                raise Error(rc, self._last_error() or strerror(rc))
            r = Request(self, req, out, key)
            self._reqs.add(r)
        return r

    def allreduce_sparse(self, indices, values, out, key):
        """iallreduce_sparse(...).wait(): out holds the dense sum; returns out."""
        return self.iallreduce_sparse(indices, values, out, key).wait()

    def allreduce_host(self, buf, key):
        """Sum buf in place over the ranks of this rank's host only (the
        host level; pbox_allreduce_host): the same bits on each of them,
        nothing sent to a box. Every local rank calls it on the same keys in
        the same order; a key used so is for host sums only. Without the
        host level buf is left as it is. Returns buf."""
        _check_key(key)
        ptr, count, dt, _ = _buffer_info(buf)
        self._blocking(self._L.pbox_allreduce_host, key, ptr, count, dt)
        return buf

    @property
    def host_layout(self):
        """(local_rank, local_world): this rank's place in its host under
        the host level; (0, 1) without it."""
        lr, lw = ctypes.c_uint32(), ctypes.c_uint32()
        with self._lock:
            rc = self._L.pbox_host_layout(self._live(), ctypes.byref(lr), ctypes.byref(lw))
        if rc < 0:
            raise Error(rc, strerror(rc))
        return lr.value, lw.value

    def topk_reset(self, key):
        """Forget key's residual (and momentum): the next top-k call starts
        from zero."""
        _check_key(key)
        with self._lock:
            h = self._live()
            rc = self._L.pbox_topk_reset(h, key)
            if rc < 0:
                raise Error(rc, self._last_error() or strerror(rc))

    # -- PS mode (include/pbox.h "PS mode") --------------------------------
    def declare_optimizer(self, key, count, dtype=PBOX_F32, optimizer="sgd", *, lr=None,
                          momentum=0.0, dampening=0.0, weight_decay=None, nesterov=False,
                          betas=(0.9, 0.999), eps=1e-8, sum=False, weights_dtype=None):
        """Declare `key` a PS key of `count` weights whose gradients come as
        `dtype` (PBOX_F32/F16/BF16, "f32"/"f16"/"bf16" or a torch dtype),
        updated on the box by `optimizer` ("sgd", "adam", "adamw") with
        PyTorch's hyperparameters and defaults (lr: SGD 0.01, Adam(W)
        0.001; weight_decay: AdamW 0.01, else 0). sum=True: the box steps
        with the sum of the gradients, not their mean over the ranks.
        weights_dtype: of the weights the box returns, f32 (default) or
        `dtype`. Collective: every rank declares every PS key with the same
        arguments, in the same order; blocks until the box answered.

        Only names and types are checked here; the box checks the values
        (momentum < 1, eps > 0, ...) and its refusal raises Error naming
        the value."""
        _check_key(key)
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise Error(EINVAL, f"key {key}: count must be a positive int, not {count!r}")
        dt = _dtype_code(dtype)
        wdt = PBOX_F32 if weights_dtype is None else _dtype_code(weights_dtype, "weights_dtype")
        if not isinstance(optimizer, str) or optimizer.lower() not in _lib.OPTIMIZERS:
            raise Error(EINVAL, f"key {key}: unknown optimizer {optimizer!r} (sgd, adam or "
                                "adamw)")
        kind = _lib.OPTIMIZERS[optimizer.lower()]
        o = _lib.Optim()
        rc = self._L.pbox_optim_init_sized(ctypes.byref(o), ctypes.sizeof(o), kind)
        if rc < 0:
            raise Error(rc, f"pbox_optim_init_sized refused {ctypes.sizeof(o)} bytes")
        if lr is not None:
            o.lr = _num("lr", lr)
        if weight_decay is not None:
            o.weight_decay = _num("weight_decay", weight_decay)
        if kind == _lib.PBOX_OPTIM_SGD:
            o.momentum = _num("momentum", momentum)
            o.dampening = _num("dampening", dampening)
            o.nesterov = 1 if nesterov else 0
        else:
            try:
                b1, b2 = betas
            except (TypeError, ValueError):
                raise Error(EINVAL, f"betas={betas!r} is not a pair of numbers")
            o.beta1, o.beta2 = _num("beta1", b1), _num("beta2", b2)
            o.eps = _num("eps", eps)
        o.sum = 1 if sum else 0
        o.weights_dtype = wdt
        self._blocking(self._L.pbox_declare_optimizer, key, count, dt, ctypes.byref(o))
        old = self._ps.get(key)
        # the library accepts a declaration again only if it is the same one
        # (lr aside): the key keeps its weights and ps_init stays done
        if old is None or (old.count, old.dtype, old.wdtype, old.kind) != (count, dt, wdt, kind):
            self._ps[key] = _PsKey(count, dt, wdt, kind)

    def _ps_key(self, key):
        _check_key(key)
        k = self._ps.get(key)
        if k is None:
            raise Error(EINVAL, f"key {key} is not a PS key of this client: "
                                "declare_optimizer(key, ...) first")
        return k

    @staticmethod
    def _ps_buffer(buf, key, count, dtype, role, writable):
        ptr, n, dt, _ = _buffer_info(buf, writable)
        if n != count or dt != dtype:
            raise Error(EINVAL, f"key {key}: {role} must hold {count} {_DTYPE_NAMES[dtype]} "
                                f"elements, not {n} {_DTYPE_NAMES[dt]}")
        return ptr

    def ps_init(self, key, weights, out):
        """The first round of PS key `key`: rank 0 passes its initial
        weights (count float32 elements), the other ranks None; every rank
        gets the box's copy in `out` (count elements of the key's
        weights_dtype). Collective; blocks. Returns out."""
        k = self._ps_key(key)
        wptr = None
        if weights is not None:
            wptr = self._ps_buffer(weights, key, k.count, PBOX_F32, "weights", False)
        optr = self._ps_buffer(out, key, k.count, k.wdtype, "out", True)
        self._blocking(self._L.pbox_ps_init, key, wptr, optr)
        k.inited = True
        return out

    def ipush_pull(self, key, grad, out):
        """Start one optimizer step on PS key `key`: push `grad` (count
        elements of the declared dtype), receive the updated weights into
        `out` (count elements of the weights dtype). Returns a Request;
        both buffers must stay untouched until its wait() returns out."""
        k = self._ps_key(key)
        if not k.inited:
            # refused here: the box would refuse it too (nothing applied),
            # but libpbox 0.5.0 then counts a round the box never saw
            raise Error(EINVAL, f"job '{self.job}' rank {self.rank} key {key}: push before "
                                "ps_init (every rank calls ps_init(key, ...) once first)")
        gptr = self._ps_buffer(grad, key, k.count, k.dtype, "grad", False)
        optr = self._ps_buffer(out, key, k.count, k.wdtype, "out", True)
        req = ctypes.c_void_p()
        with self._lock:
            h = self._live()
            rc = self._L.pbox_ipush_pull(h, key, gptr, optr, k.count, k.dtype,
                                         ctypes.byref(req))
            if rc < 0:
                raise Error(rc, self._last_error() or strerror(rc))
            r = Request(self, req, out, key, keep=grad)
            self._reqs.add(r)
        return r

    def push_pull(self, key, grad, out):
        """One optimizer step on PS key `key` (ipush_pull and wait); returns out."""
        return self.ipush_pull(key, grad, out).wait()

    def set_lr(self, key, lr):
        """The learning rate the next pushes of PS key `key` carry (finite,
        >= 0; the box uses rank 0's). Local: no round trip."""
        self._ps_key(key)
        v = _num("lr", lr)
        with self._lock:
            rc = self._L.pbox_set_lr(self._live(), key, v)
            if rc < 0:
                raise Error(rc, self._last_error() or strerror(rc))

    def ps_read(self, key, out, part="weights"):
        """Read PS key `key`'s fp32 weights or optimizer state ('state0':
        SGD's momentum buffer or Adam's exp_avg; 'state1': Adam's
        exp_avg_sq) from the box into `out` (count float32 elements);
        return the number of optimizer steps they hold. Only between steps:
        while any rank has a push of the key in flight the box answers
        EBUSY. Goes through the control connection: for checkpoints."""
        k = self._ps_key(key)
        p = _ps_part(part)
        optr = self._ps_buffer(out, key, k.count, PBOX_F32, "out", True)
        steps = ctypes.c_uint64()
        self._blocking(self._L.pbox_ps_read, key, p, optr, k.count, ctypes.byref(steps))
        return steps.value

    def ps_write(self, key, data, part="weights"):
        """Rank 0, between steps: overwrite PS key `key`'s weights or state
        on the box with `data` (count float32 elements). The other ranks
        get new weights with the next step's result."""
        k = self._ps_key(key)
        p = _ps_part(part)
        dptr = self._ps_buffer(data, key, k.count, PBOX_F32, "data", False)
        self._blocking(self._L.pbox_ps_write, key, p, dptr, k.count)

    def ps_set_steps(self, key, steps):
        """Rank 0, between steps: set the optimizer steps PS key `key` has
        taken (the next step is steps + 1: Adam's bias correction)."""
        self._ps_key(key)
        if isinstance(steps, bool) or not isinstance(steps, int) or not 0 <= steps < 2 ** 64:
            raise Error(EINVAL, f"key {key}: steps must be an int >= 0, not {steps!r}")
        self._blocking(self._L.pbox_ps_set_steps, key, steps)

    def stats(self):
        """The client's counters as a dict."""
        s = _lib.Stats()
        with self._lock:
            rc = self._L.pbox_get_stats_sized(self._live(), ctypes.byref(s), ctypes.sizeof(s))
        if rc < 0:
            raise Error(rc, f"pbox_get_stats_sized refused {ctypes.sizeof(s)} bytes")
        return {f: getattr(s, f) for f, _ in _lib.Stats._fields_}

    @property
    def transport_info(self):
        """One line: the transport in use and why faster ones were skipped."""
        with self._lock:
            m = self._L.pbox_transport_info(self._live())
        return m.decode(errors="replace") if m else ""

    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Leave the job. Waits for threads inside Request.wait() (each is
        bounded by timeout_ms); requests never waited for are abandoned and
        their wait() raises ECLOSED. Idempotent."""
        with self._lock:
            if self._handle is None:
                return
            while self._waiting:
                self._idle.wait()
            h, self._handle = self._handle, None
            for r in self._reqs:       # never waited for: their wait() raises ECLOSED
                r._handle = None
                r._closed = True
            self._reqs.clear()
        self._L.pbox_close(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return (f"<pbox.Client {state} control={self.control!r} job={self.job!r} "
                f"rank={self.rank} world={self.world}>")
