# SPDX-License-Identifier: BSD-3-Clause
"""pbox.torch - PyTorch on a pbox: the torch.distributed backend "pbox"
(registered by importing this module: dist.init_process_group("pbox");
pbox/backend.py), DDP communication hooks that sum gradients on the box
beside another backend, and BoxOptimizer, an optimizer that runs on the
box (PS mode; its own section below).

    import pbox, pbox.torch
    state = pbox.torch.State(pbox.Client())
    ddp_model.register_comm_hook(state, pbox.torch.allreduce_hook)

The process group (Gloo) still does DDP's set-up work (parameter broadcast,
bucket-order sync); only the gradient buckets go through the box.

How a hook works: DDP calls it from autograd as soon as a bucket's gradients
are all ready. The hook starts pbox_iallreduce on the bucket's flat buffer
(it returns at once) and hands back a torch.futures.Future. One waiter
thread per State waits for the requests in order (pbox_wait releases the
GIL), divides the sum by the world size and completes the future, so the
communication of one bucket overlaps the backward pass of the next ones.
DDP waits for every future at the end of backward.

CUDA buckets (docs/gpu.md, docs/pytorch.md "CUDA buckets"): the hook starts
pbox_iallreduce_dev on the bucket with the stream current at the hook (the
one autograd computed the bucket on) and the mean's scale (and, for the
fp16/bf16 hooks, the wire dtype) fused into the copies; the waiter completes
a CUDA-aware future on that stream after pbox_wait has ordered the stream
after the sum, so nothing waits for the device on the host. Without a GPU
library or device the hook's future fails with the library's reason ("no
GPU library: ...", "no CUDA device: ...").

Keys: pbox needs a key per buffer with the same size and dtype on every
rank, and every rank must use the same key. DDP numbers its buckets
0..n-1, but after the first iteration it rebuilds them in gradient-arrival
order, so the same index can then have another size. The hook's key is
therefore a hash of (State name, bucket index, element count, wire dtype)
truncated to 31 bits: identical on all ranks without any exchange, stable
across iterations, and a new key after a rebuild (the first layout's keys
are then released, so the box holds one layout: State.key). Hook keys lie in
0..2**31-1; keys of your own should use 2**31 and above (BoxOptimizer's
are hashes there too; a key of your own that collides with one of them
is refused when the second declaration meets the first).

PS mode, without DDP (every rank builds the same model):

    opt = pbox.torch.BoxOptimizer(model.parameters(), "sgd", lr=0.1, momentum=0.9)
    ...
    loss.backward()
    opt.step()          # gradients to the box, updated weights back
"""
import collections
import hashlib
import math
import queue
import threading
import time
import weakref

import torch
from torch.optim.optimizer import required as _torch_required

from . import _sparse
from ._sparse import DENSE_BELOW, WARMUP_STEPS, WARMUP_START, MAX_IDLE, MIN_ENTRIES  # noqa: F401 (docs)
from . import Client, Error, EAGAIN, EINVAL, EBUSY, ETIMEDOUT, _cuda_stream, _env, _on_stream

__all__ = ["State", "allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "key_for",
           "key_bytes_for",
           "BoxOptimizer", "ps_key_for", "TopkState", "TopkSGD", "TopkAdam", "topk_hook", "topk_allreduce",
           "sparse_allreduce", "ProcessGroupPBox", "set_backend_options"]

_KEY_MASK = 0x7FFFFFFF
_DTYPE_NAME = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def key_bytes_for(model, dtype=None, margin=1 / 32):
    """Box memory a DDP job of `model` needs for its keys: its gradients
    (every parameter that requires grad, as dtype: default the parameter's
    own, torch.float16/bfloat16 for the compress hooks) or, if larger, its
    parameters and buffers (what DDP broadcasts at start through the pbox
    backend), plus `margin` for segment state and 1 MiB: every bucket of
    one iteration at once. Give it as Client(key_bytes=...),
    State(key_bytes=...) or set_backend_options(key_bytes=...): the first
    rank then sizes the job as the box's engine memory plus this (the pbox
    backend: plus twice this, and keeps its keys under half the job's key
    memory; docs/pytorch.md "Job memory")."""
    def size(t, dt=None):
        return t.numel() * torch.empty((), dtype=dt or t.dtype).element_size()
    grads = sum(size(p, dtype) for p in model.parameters() if p.requires_grad)
    states = sum(size(p) for p in model.parameters()) + sum(size(b) for b in model.buffers())
    return int(max(grads, states) * (1 + margin)) + (1 << 20)


def key_for(name, index, numel, dtype):
    """The key the hooks use for a bucket: 31 bits of BLAKE2b over
    (name, index, numel, dtype). The same on every rank."""
    dt = _DTYPE_NAME.get(dtype, str(dtype))
    h = hashlib.blake2b(f"pbox-ddp|{name}|{index}|{numel}|{dt}".encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little") & _KEY_MASK


class State:
    """Per-model state of the pbox hooks.

    State(client=None, name="ddp", world=None, key_bytes=0)
      client: a pbox.Client (default: pbox.Client() from the environment);
              the State closes it at close() only if it made it.
      name:   separates the keys of several DDP models on one client
              (each model needs its own State with its own name).
      world:  divisor of the sum (default client.world).
      key_bytes: for the Client it makes: size the job for keys of this
              many bytes (key_bytes_for(model)), not the box's default.
    """

    def __init__(self, client=None, name="ddp", world=None, key_bytes=0):
        self._own_client = client is None
        self.client = client if client is not None else Client(key_bytes=key_bytes)
        self.name = str(name)
        self.world = int(world if world is not None else self.client.world)
        self._keys = {}        # (index, numel, dtype name) -> key
        self._owner = {}       # key -> (index, numel, dtype name)
        self._held = set()     # keys of completed iterations (live on the box)
        self._cur = []         # keys of the iteration in progress
        self._iters = 0        # iterations completed (a bucket said is_last)
        self.released = 0      # keys given back after a bucket rebuild
        self._klock = threading.Lock()
        self._q = queue.SimpleQueue()
        self._thread = None
        self._tlock = threading.Lock()
        self.calls = 0

    # DDP pickles nothing of the state for CPU hooks, but keep it harmless.
    def __getstate__(self):
        raise TypeError("pbox.torch.State cannot be pickled")

    @property
    def keys(self):
        """{(bucket index, numel, dtype): key} of every bucket seen so far."""
        with self._klock:
            return dict(self._keys)

    def key(self, index, numel, dtype, last=False):
        """The key of bucket `index` (numel elements sent as dtype); last:
        the bucket is the iteration's last (GradBucket.is_last()).

        Key release: when a bucket needs a key that no completed iteration
        used (DDP rebuilt its buckets, once, after the first iteration),
        the keys of completed iterations not used so far in this one are
        released first (pbox_release_keys), so the box needs memory for
        one bucket layout, not two. Every rank sees the same buckets in the
        same order, so all release the same keys; their calls ended with
        the iteration DDP waited for."""
        t = (int(index), int(numel), _DTYPE_NAME.get(dtype, str(dtype)))
        with self._klock:
            k = self._keys.get(t)
            if k is None:
                k = key_for(self.name, index, numel, dtype)
                other = self._owner.get(k)
                if other is not None and other != t:
                    raise Error(EINVAL, f"DDP buckets {other} and {t} hash to the same pbox "
                                        f"key {k}; give the State another name")
                if self._iters:
                    self._release(self._held - set(self._cur))
                self._keys[t] = k
                self._owner[k] = t
            self._cur.append(k)
            if last:
                self._end_iteration()
            return k

    def skip(self, last=False):
        """A bucket with nothing to send (no elements): no key; only the
        iteration's end is noted when it is the last."""
        with self._klock:
            if last:
                self._end_iteration()

    def _end_iteration(self):
        # under _klock: the iteration's keys are now held on the box
        self._held |= set(self._cur)
        self._cur = []
        self._iters += 1

    def _release(self, keys):
        """Forget keys and give them back to the box (under _klock): the
        State's part first, as the release takes the library's with it (a
        device top-k key's residual)."""
        keys = sorted(keys)
        for k in keys:
            self._forget(k)
        for i in range(0, len(keys), 1024):
            self.client.release(keys[i:i + 1024])
        for k in keys:
            self._keys.pop(self._owner.pop(k), None)
            self._held.discard(k)
        self.released += len(keys)

    def _forget(self, key):
        """What the State keeps per key besides the box's part (none)."""

    def _start(self):
        with self._tlock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="pbox-ddp-waiter",
                                                daemon=True)
                self._thread.start()

    def _run(self):
        while True:
            item = self._q.get()
            if item is None:
                return
            req, finish, fut, stream = item
            try:
                req.wait()
                with _on_stream(stream):   # a CUDA bucket: complete on its stream
                    res = finish()
                    fut.set_result(res)
            except BaseException as e:  # hand every failure to DDP via the future
                if not fut.done():
                    fut.set_exception(e if isinstance(e, Exception) else RuntimeError(str(e)))

    def _request(self, buf, key):
        """Start the sum of buf under key (a dense allreduce)."""
        return self.client.iallreduce(buf, key)

    def submit(self, buf, key, finish, start=None):
        """Start the sum of buf under key (start(buf, key) if given, else a
        dense allreduce); return a Future completed with finish() (run on
        the waiter thread) once the sum is in buf."""
        fut = torch.futures.Future()
        # Python's set_exception stores the exception as the value; DDP (C++)
        # would then fail with "Unable to cast ... to Tensor". Chaining
        # .then() turns it into a real error of the returned future, so
        # backward() raises the pbox.Error's message.
        out = fut.then(_unwrap)
        # one torch.profiler span per bucket, from its start until its sum is in
        with torch.autograd.profiler.record_function("pbox::bucket") as rf:
            try:
                req = (start or self._request)(buf, key)
            except Exception as e:
                fut.set_exception(e)
                return out
            out = rf._call_end_callbacks_on_future(out)
        self.calls += 1
        self._start()
        self._q.put((req, finish, fut, None))
        return out

    def _request_cuda(self, buf, key, scale, wire_dtype, stream):
        """Start the sum of the CUDA tensor buf under key on stream."""
        return self.client.iallreduce_cuda(buf, key, scale=scale, wire_dtype=wire_dtype,
                                           stream=stream)

    def submit_cuda(self, buf, key, scale, wire_dtype=None):
        """Start the sum of the CUDA tensor buf under key, scaled (and sent
        as wire_dtype) on the device; return a CUDA-aware Future completed
        with buf on buf's current stream once the sum is ordered there."""
        with torch.autograd.profiler.record_function("pbox::bucket") as rf:
            try:
                self.client.gpu_init()           # names a missing GPU library or device
                stream = _cuda_stream(buf)       # the one autograd computed the bucket on
                req = self._request_cuda(buf, key, scale, wire_dtype, stream)
            except Exception as e:
                return _failed(e)
            fut = torch.futures.Future(devices=[buf.device])
            out = rf._call_end_callbacks_on_future(fut.then(_unwrap))
        self.calls += 1
        self._start()
        self._q.put((req, lambda: buf, fut, stream))
        return out

    def close(self):
        """Stop the waiter thread (after the requests queued so far) and
        close the client if the State made it."""
        with self._tlock:
            t, self._thread = self._thread, None
        if t is not None:
            self._q.put(None)
            t.join()
        if self._own_client:
            self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _unwrap(fut):
    return fut.value()


def _failed(e):
    fut = torch.futures.Future()
    out = fut.then(_unwrap)
    fut.set_exception(e)
    return out


def _empty_bucket(state, bucket, buf):
    """A bucket of no elements (e.g. the only parameters of a dtype are
    empty): nothing to sum, as Gloo's allreduce of nothing; the future is
    complete at once (a zero-element key cannot be declared)."""
    state.skip(_is_last(bucket))
    fut = torch.futures.Future(devices=[buf.device]) if buf.device.type == "cuda" \
        else torch.futures.Future()
    fut.set_result(buf)
    return fut


def _bucket_buffer(bucket):
    buf = bucket.buffer()
    if buf.device.type not in ("cpu", "cuda"):
        raise Error(EINVAL, f"DDP bucket {bucket.index()} is on {buf.device}; the pbox hooks "
                            "take CPU and CUDA tensors")
    return buf


def _is_last(bucket):
    last = getattr(bucket, "is_last", None)
    return bool(last()) if last is not None else False


def allreduce_hook(state, bucket):
    """Average the bucket over all ranks through the box, in its own dtype
    (float32, float16 or bfloat16 gradients; CPU or CUDA)."""
    try:
        buf = _bucket_buffer(bucket)
        if buf.numel() == 0:
            return _empty_bucket(state, bucket, buf)
        key = state.key(bucket.index(), buf.numel(), buf.dtype, _is_last(bucket))
    except Exception as e:
        return _failed(e)
    world = state.world
    if buf.device.type == "cuda":   # TopkState: selected on the device (float32)
        return state.submit_cuda(buf, key, 1.0 / world)

    def finish():
        return buf.div_(world)

    return state.submit(buf, key, finish)


def _compress_hook(state, bucket, dtype):
    try:
        buf = _bucket_buffer(bucket)
        if buf.numel() == 0:
            return _empty_bucket(state, bucket, buf)
        key = state.key(bucket.index(), buf.numel(), dtype, _is_last(bucket))
    except Exception as e:
        return _failed(e)
    if buf.device.type == "cuda":   # the cast, both ways, fused into the copies
        return state.submit_cuda(buf, key, 1.0 / state.world, wire_dtype=dtype)
    comp = buf.to(dtype)   # a new contiguous tensor, rounded once
    world = state.world

    def finish():
        # the box summed in fp32 and rounded once to dtype; widen, then divide
        buf.copy_(comp)
        return buf.div_(world)

    return state.submit(comp, key, finish)


def fp16_compress_hook(state, bucket):
    """Send the bucket as IEEE float16 (half the bytes), return float32.
    The sum is taken before dividing by the world size, so |sum| over ranks
    must stay below 65504 per element (use bf16_compress_hook otherwise)."""
    return _compress_hook(state, bucket, torch.float16)


def bf16_compress_hook(state, bucket):
    """Send the bucket as bfloat16 (half the bytes, float32's range, 8 bits
    of mantissa), return float32."""
    return _compress_hook(state, bucket, torch.bfloat16)


# ---- sparse gradients: top-k with error feedback ----------------------------
#
# Each rank sends only about `density` of its bucket's entries, the largest
# of gradient + residual (the residual, what earlier steps did not send,
# lives in libpbox per key: error feedback); the box sums the ranks' entries
# and every rank gets the same dense sum (include/pbox.h "Sparse keys").
# The keys are hashes as for the dense hooks, of another name space.


class TopkState(State):
    """State of topk_hook: State(client, name, world) plus the sparsity.

    TopkState(client=None, name="topk", world=None, density=0.01,
              error_feedback=True, momentum=0.0, local=None, *,
              nesterov=False, masking=True, clip=None, warmup=WARMUP_STEPS,
              warmup_start=WARMUP_START, schedule=None,
              dense_below=DENSE_BELOW, whole="dense", select="bucket",
              max_idle=MAX_IDLE, min_entries=None, model=None, host=True)
      density:        the target fraction of each bucket's entries sent, (0, 1].
      error_feedback: keep what is not sent and add it to the next step's
                      gradient (the residual, per bucket); without it the
                      rest is dropped.
      momentum:       momentum correction (Lin et al., Deep Gradient
                      Compression): momentum accumulated before selection,
                      then the optimizer runs without momentum. 0 = off.
                      pbox.torch.TopkSGD sets it (and nesterov, weight
                      decay) from its own arguments.
      nesterov:       Nesterov momentum in the correction (v += g + m u).
      masking:        momentum factor masking: clear the momentum where an
                      entry of a sparse layer was sent.
      clip:           local gradient clipping: each bucket's gradient is
                      scaled to an L2 norm of at most clip / sqrt(world)
                      before it is accumulated. None = off.
      warmup, warmup_start: density falls exponentially from warmup_start
                      at step 0 to density at step `warmup` (0: no warm-up).
      schedule:       instead, [(step, density), ...]: exponential between
                      the points; the last density must be `density`.
      dense_below:    tensors (parameters) of fewer elements are sent whole
                      (biases, norms).
      whole:          how the tensors sent whole travel: "dense" (default),
                      their values alone in a dense allreduce of their own
                      beside the sparse call (4 bytes an element, a second
                      key per bucket); "entries", as entries of the sparse
                      call (8 bytes an element: index and value).
      select:         "bucket": one selection over the bucket's tensors, and
                      a tensor that sent nothing for max_idle steps gets its
                      own share then (None: no guard); "layer": each tensor
                      sends its own top density (never starves one).
      min_entries:    with select="bucket", a bucket's selection takes at
                      least this many entries (all of its sparse tensors'
                      if fewer). None (default): MIN_ENTRIES (1024, about
                      one 9000-byte frame of 8-byte entries, below which a
                      bucket saves no frames, and small models' buckets
                      starve at 1%: the suite's transformer), but 0 under
                      momentum correction with masking (TopkSGD's
                      default), where each entry sent clears its momentum
                      and a floor trains worse (the suite's CNN;
                      docs/performance.md). 0: density alone.
      model:          the module (or the parameters, in order) whose
                      residuals state_dict() names; TopkSGD gives its own.
      local:          hierarchical top-k (CPU buckets): (local_rank, local_size)
                      of this rank on its host, or "env" for torchrun's
                      LOCAL_RANK and LOCAL_WORLD_SIZE. The host's ranks
                      (consecutive, local rank 0 first) sum each bucket through
                      shared memory; local rank 0 alone keeps the residual,
                      selects and sends. None (default): every rank on its own.
      host:           under the host level (torchrun with LOCAL_WORLD_SIZE > 1,
                      or Client(local_world=...); docs/architecture.md "The
                      host level"), True (default): each bucket is summed on
                      the host first (Client.allreduce_host) and local rank 0
                      runs all of the below on the host's sum, with the
                      host's residuals: one selection per host, so a host
                      link carries density of a bucket's entries, not
                      LOCAL_WORLD_SIZE times as many. False: every rank
                      selects from its own gradient (the host level then
                      merges the ranks' entries). libpbox's own top-k (the
                      other buckets) always selects from the host's sum.
    CPU float32 buckets without `local` run all of the above on the worker
    (pbox/_sparse.py); the others (CUDA, 16-bit, hierarchical) use
    libpbox's own top-k with the schedule's density and, on the host,
    libpbox's momentum correction (nesterov, masking, clip, layer-aware
    selection and state_dict() do not apply to them).
    When DDP rebuilds its buckets after the first iteration, the first
    layout's keys are released; the worker-side residuals move to the new
    buckets parameter by parameter (libpbox's are dropped).
    """

    def __init__(self, client=None, name="topk", world=None, density=0.01,
                 error_feedback=True, momentum=0.0, local=None, *, nesterov=False,
                 masking=True, clip=None, warmup=None, warmup_start=None, schedule=None,
                 dense_below=None, whole="dense", select=None, max_idle=-1, model=None,
                 host=True, min_entries=None):
        density = _real_arg("density", density)
        momentum = _real_arg("momentum", momentum)
        if not 0 < density <= 1:
            raise ValueError(f"density {density} is outside (0, 1]")
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum {momentum} is outside [0, 1)")
        if nesterov and momentum <= 0:
            raise ValueError("nesterov=True needs a momentum > 0")
        if clip is not None and not _real_arg("clip", clip) > 0:
            raise ValueError(f"clip {clip} must be > 0 (None: no clipping)")
        select = _sparse.SELECT if select is None else select
        max_idle = _sparse.MAX_IDLE if max_idle == -1 else max_idle
        if select not in ("layer", "bucket"):
            raise ValueError(f"select must be 'layer' or 'bucket', not {select!r}")
        if max_idle is not None and int(max_idle) < 1:
            raise ValueError(f"max_idle {max_idle} must be >= 1 (None: no guard)")
        if min_entries is not None and (isinstance(min_entries, bool) or
                                        not isinstance(min_entries, int) or min_entries < 0):
            raise ValueError(f"min_entries {min_entries!r} must be an int >= 0 (or None)")
        dense_below = _sparse.DENSE_BELOW if dense_below is None else int(dense_below)
        if dense_below < 0:
            raise ValueError(f"dense_below {dense_below} must be >= 0")
        if whole not in ("dense", "entries"):
            raise ValueError(f"whole must be 'dense' or 'entries', not {whole!r}")
        if schedule is not None:
            if warmup is not None or warmup_start is not None:
                raise ValueError("give either schedule or warmup/warmup_start, not both")
            sched = _sparse.Schedule(density, schedule)
        else:
            ws = _sparse.WARMUP_STEPS if warmup is None else int(warmup)
            start = _sparse.WARMUP_START if warmup_start is None else \
                _real_arg("warmup_start", warmup_start)
            if ws < 0:
                raise ValueError(f"warmup {ws} must be >= 0 steps")
            if not 0 < start <= 1:
                raise ValueError(f"warmup_start {start} is outside (0, 1]")
            sched = _sparse.warmup_schedule(density, ws, start)
        super().__init__(client, "topk|" + str(name), world)
        self.density, self.error_feedback, self.momentum = density, bool(error_feedback), momentum
        if local == "env":
            try:
                local = (_env.integer("LOCAL_RANK"), _env.integer("LOCAL_WORLD_SIZE"))
                if None in local:
                    raise ValueError("one is unset")
            except ValueError as e:
                raise ValueError("local='env' needs LOCAL_RANK and LOCAL_WORLD_SIZE in the "
                                 f"environment (torchrun sets them): {e}") from None
        if local is not None:
            lr, ls = (int(v) for v in local)
            if not 0 <= lr < ls:
                raise ValueError(f"local=({lr}, {ls}): need 0 <= local_rank < local_size")
            local = None if ls == 1 else (lr, ls)
        self.local = local
        self.engine = _sparse.Engine(density, self.error_feedback, momentum, bool(nesterov),
                                     bool(masking), clip, sched, dense_below, select,
                                     None if max_idle is None else int(max_idle))
        if model is not None:
            self.engine.params = list(model.parameters() if isinstance(model, torch.nn.Module)
                                      else model)
        self._libkeys = set()   # keys on libpbox's top-k path (a residual there)
        self.whole = whole
        self._wkeys = {}        # bucket key -> the key of its tensors sent whole
        self.host = bool(host)
        self.engine.min_entries = min_entries
        self._hkeys = {}        # bucket key -> the key of its host sums
        self._layout = None     # (local_rank, local_world) of the client, once asked
        self.optimizer = None

    @property
    def nesterov(self):
        return self.engine.nesterov

    @property
    def step(self):
        """Steps completed (iterations whose last bucket went out)."""
        return self.engine.step

    def density_now(self):
        """The density this step's buckets are sent at (the schedule's)."""
        return self.engine.density_at()

    def attach(self, optimizer):
        """Check that `optimizer` suits this state's momentum correction
        and take its parameters' order for state_dict(). TopkSGD calls it;
        with another optimizer call it yourself. ValueError: momentum
        correction (momentum > 0) with an optimizer other than
        pbox.torch.TopkSGD or torch.optim.SGD without momentum (momentum
        would be applied twice; Adam's moments are no momentum the
        correction can carry), or torch.optim.SGD with momentum beside it."""
        kind = type(optimizer).__name__
        if self.momentum > 0 and isinstance(optimizer, TopkAdam):
            raise ValueError("TopkAdam runs Adam's moments in the hook; make its TopkState "
                             "with momentum=0")
        if self.momentum > 0 and not isinstance(optimizer, (TopkSGD, TopkAdam)):
            if isinstance(optimizer, torch.optim.SGD):
                if any(g.get("momentum", 0) for g in optimizer.param_groups):
                    raise ValueError("TopkState(momentum=...) does the momentum (momentum "
                                     "correction): the torch.optim.SGD beside it must have "
                                     "momentum=0 (or use pbox.torch.TopkSGD)")
            else:
                raise ValueError(f"momentum correction (TopkState(momentum="
                                 f"{self.momentum:g})) works with SGD only, not {kind}: use "
                                 "pbox.torch.TopkSGD, or momentum=0 (error feedback alone) "
                                 "for Adam and others (docs/pytorch.md)")
        if self.engine.params is None:
            self.engine.params = [p for g in optimizer.param_groups for p in g["params"]]
        self.optimizer = optimizer

    def state_dict(self):
        """The worker-side residuals and momentum, per parameter (by its
        position in the model or optimizer), and the schedule's step."""
        return self.engine.state_dict()

    def load_state_dict(self, sd):
        """Load state_dict()'s output; a parameter of another shape drops
        all of it with a RuntimeWarning (the model changed)."""
        self.engine.load_state_dict(sd)

    # for hook tests and the bench: what went out
    @property
    def entries_sent(self):
        return self.engine.sent

    def whole_key(self, key, index, numel):
        """The dense key of bucket `key`'s tensors sent whole (numel
        elements): a hash of another name space, released with the
        bucket's key."""
        with self._klock:
            wk = self._wkeys.get(key)
            if wk is None:
                wk = key_for(self.name + "|whole", index, numel, torch.float32)
                if wk in self._owner or wk in self._wkeys.values() or \
                        wk in self._hkeys.values():
                    raise Error(EINVAL, f"the whole-sent tensors' key of DDP bucket {index} "
                                        f"hashes to pbox key {wk}, already used; give the "
                                        "TopkState another name")
                self._wkeys[key] = wk
            return wk

    def host_layout(self):
        """(local_rank, local_world) this state selects by: the client's
        host level with host=True, else (0, 1)."""
        if self._layout is None:   # (a stand-in client without it: flat)
            self._layout = getattr(self.client, "host_layout", (0, 1)) if self.host else (0, 1)
        return self._layout

    def host_key(self, key, index, numel):
        """The key of bucket `key`'s host sums (numel elements): a hash of
        another name space, released with the bucket's key."""
        with self._klock:
            hk = self._hkeys.get(key)
            if hk is None:
                hk = key_for(self.name + "|host", index, numel, torch.float32)
                if hk in self._owner or hk in self._wkeys.values() or \
                        hk in self._hkeys.values():
                    raise Error(EINVAL, f"the host sums' key of DDP bucket {index} hashes to "
                                        f"pbox key {hk}, already used; give the TopkState "
                                        "another name")
                self._hkeys[key] = hk
            return hk

    def _forget(self, key):
        wk = self._wkeys.pop(key, None)
        if wk is not None:
            self.client.release([wk])
        hk = self._hkeys.pop(key, None)
        if hk is not None:
            self.client.release([hk])
        self.engine.forget(key)
        if key in self._libkeys:
            self._libkeys.discard(key)
            self.client.topk_reset(key)

    def _request(self, buf, key):
        self._libkeys.add(key)
        return self.client.iallreduce_topk(buf, key, self.density_now(),
                                           error_feedback=self.error_feedback,
                                           momentum=self.momentum, local=self.local)

    def _request_cuda(self, buf, key, scale, wire_dtype, stream):
        # selected on the device; the mean's 1/world fused into the copy back
        if self.local is not None:
            raise Error(EINVAL, "TopkState(local=...): hierarchical top-k takes CPU buckets "
                                "(the host group sums in host memory)")
        self._libkeys.add(key)
        return self.client.iallreduce_topk_cuda(buf, key, self.density_now(),
                                                error_feedback=self.error_feedback,
                                                momentum=self.momentum, scale=scale,
                                                stream=stream)


def _real_arg(name, v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={v!r} is not a number") from None
    if not math.isfinite(v):
        raise ValueError(f"{name}={v!r} is not finite")
    return v


def topk_hook(state, bucket):
    """Average the bucket over all ranks through the box, sending only the
    top `state.density` of its entries by magnitude (with error feedback:
    gradient + residual; TopkState for the rest). state is a TopkState."""
    if not isinstance(state, TopkState):
        return _failed(Error(EINVAL, "topk_hook needs a pbox.torch.TopkState"))
    try:
        buf = _bucket_buffer(bucket)
        last = _is_last(bucket)
        if buf.device.type != "cpu" or buf.dtype != torch.float32 or state.local is not None:
            fut = allreduce_hook(state, bucket)
            if last:
                state.engine.step += 1
            return fut
        if buf.numel() == 0:
            return _empty_bucket(state, bucket, buf)
        key = state.key(bucket.index(), buf.numel(), buf.dtype, last)
        # under the host level, local rank 0 selects from the host's sum
        lrank, lworld = state.host_layout()
        if lworld > 1:
            state.client.allreduce_host(buf, state.host_key(key, bucket.index(), buf.numel()))
        t0 = time.perf_counter()
        split = state.whole == "dense"
        if lrank:
            out = state.engine.follow(key, bucket, split=split)
        else:
            out = state.engine.prepare(key, bucket, buf, state.world // lworld, split=split,
                                       ranks=lworld)
        idx, val, whole, wval = out if split else out + (None, None)
        state.engine.seconds += time.perf_counter() - t0
        if last:
            state.engine.step += 1
        wkey = None if whole is None else state.whole_key(key, bucket.index(), whole.numel())
        all_whole = whole is not None and whole.numel() == buf.numel()
    except Exception as e:
        return _failed(e)
    world = state.world

    def start(out, k):
        if all_whole:   # no sparse tensor in the bucket (the same on every rank)
            return state.client.iallreduce(wval, wkey)
        r = state.client.iallreduce_sparse(idx.numpy(), val.numpy(), out, k)
        if whole is None:
            return r
        try:
            return _Both(r, state.client.iallreduce(wval, wkey))
        except BaseException:
            r.wait()
            raise

    def finish():
        if whole is not None:
            if all_whole:
                buf.zero_()
            buf[whole] = wval
        return buf.div_(world)

    return state.submit(buf, key, finish, start)


class _Both:
    """Two requests waited as one (topk_hook: the entries and the values
    of the tensors sent whole)."""

    def __init__(self, a, b):
        self._a, self._b = a, b

    def wait(self):
        try:
            self._a.wait()
        finally:
            self._b.wait()


class _TopkStateDict:
    """TopkAdam's and TopkSGD's state_dict: the optimizer's, with the
    TopkState's residuals and momenta under "pbox_topk"."""

    def state_dict(self):
        sd = super().state_dict()
        sd["pbox_topk"] = self.topk_state.state_dict()
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        topk = state_dict.pop("pbox_topk", None)
        super().load_state_dict(state_dict)
        if topk is not None:
            self.topk_state.load_state_dict(topk)


class TopkAdam(_TopkStateDict, torch.optim.Optimizer):
    """Adam (decoupled weight decay, AdamW's) for DDP with topk_hook.

    TopkAdam(params, state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
             weight_decay=0, moments="global")
      moments="global" (the default): the hook sends the top-k of gradient
             + residual (error feedback) and this optimizer runs Adam's
             moments on the averaged sparse gradient, the same on every
             rank, as torch.optim.Adam would (state.attach'ed).
      moments="delayed": the same, but an entry that arrives k steps
             after its last arrival counts as k steps of 1/k of it: its
             moments advance k steps at once and its weight moves by k of
             Adam's steps; entries that did not arrive stand still. (Under
             "global" such an entry moves by about sqrt(k) steps, not k:
             the k steps' sum enters the second moment squared.) At
             density 1 it is torch.optim.Adam. It trains much faster where
             the learning rate is below the best, and worse at very low
             densities where it is at its best (docs/pytorch.md).
      moments="local": each rank runs Adam's moments on its own gradient
             in the hook and the top-k (with error feedback) of Adam's
             step direction goes to the box; this step applies the
             average. It trains worse even at density 1: the average of
             the ranks' normalised directions is not Adam's direction of
             the averaged gradient (docs/pytorch.md, the measured table).
    One betas and eps for all param groups; lr and weight_decay per group.
    state_dict() carries the moments and residuals ("pbox_topk")."""

    def __init__(self, params, state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 moments="global"):
        if not isinstance(state, TopkState):
            raise TypeError(f"TopkAdam needs a pbox.torch.TopkState, not {type(state).__name__}")
        if moments not in ("global", "local", "delayed"):
            raise ValueError(f"TopkAdam: moments must be 'global', 'delayed' or 'local', "
                             f"not {moments!r}")
        if state.momentum:
            raise ValueError("TopkAdam runs Adam's moments in the hook; make its TopkState "
                             "with momentum=0")
        if state.local is not None:
            raise ValueError("TopkAdam: hierarchical top-k (TopkState(local=...)) selects in "
                             "libpbox; not supported")
        b1, b2 = (_real_arg("betas", b) for b in betas)
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise ValueError(f"TopkAdam: betas {betas} must be in [0, 1)")
        if not _real_arg("eps", eps) > 0:
            raise ValueError(f"TopkAdam: eps {eps} must be > 0")
        if _real_arg("lr", lr) < 0 or _real_arg("weight_decay", weight_decay) < 0:
            raise ValueError("TopkAdam: lr and weight_decay must be >= 0")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay))
        self.moments, self.betas, self.eps = moments, (b1, b2), float(eps)
        if moments == "local":
            state.engine.adam = (b1, b2, float(eps))
        self.topk_state = state
        state.attach(self)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        b1, b2 = self.betas
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                if g["weight_decay"]:
                    p.mul_(1 - g["lr"] * g["weight_decay"])
                if self.moments == "local":   # the hook's average of Adam's directions
                    p.add_(p.grad, alpha=-g["lr"])
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                    if self.moments == "delayed":
                        st["last"] = torch.zeros_like(p)
                st["step"] += 1
                t, m, v = st["step"], st["exp_avg"], st["exp_avg_sq"]
                if self.moments == "delayed":
                    self._delayed(p, g["lr"], st)
                    continue
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                den = (v / (1 - b2 ** t)).sqrt_().add_(self.eps)
                p.addcdiv_(m, den, value=-g["lr"] / (1 - b1 ** t))
        return loss

    def _delayed(self, p, lr, st):
        """moments="delayed": an entry that arrives after k steps without
        one carries about k steps of gradient (error feedback): it counts
        as k steps of gradient G/k each, the moments advanced by k steps at
        once and the weight moved by k of Adam's steps; entries that did
        not arrive stand still."""
        b1, b2 = self.betas
        t, m, v, last = st["step"], st["exp_avg"], st["exp_avg_sq"], st["last"]
        gr = p.grad
        nz = gr != 0
        if not bool(nz.any()):
            return
        k = (t - last[nz])
        c = gr[nz] / k
        d1, d2 = torch.pow(b1, k), torch.pow(b2, k)
        mn = m[nz] * d1 + (1 - d1) * c
        vn = v[nz] * d2 + (1 - d2) * c * c
        m[nz], v[nz], last[nz] = mn, vn, float(t)
        den = (vn / (1 - b2 ** t)).sqrt_().add_(self.eps)
        step = k * mn / (1 - b1 ** t) / den
        p[nz] -= lr * step


class TopkSGD(_TopkStateDict, torch.optim.SGD):
    """torch.optim.SGD for DDP with topk_hook: the momentum (and Nesterov,
    and weight decay) run in the hook before the selection (momentum
    correction, TopkState), so this optimizer's own step is plain SGD on
    the averaged sparse sum.

    TopkSGD(params, state, lr, momentum=0, dampening=0, weight_decay=0,
            nesterov=False)
      state: the TopkState registered with topk_hook; its momentum and
             nesterov are set from these arguments. One momentum for all
             param groups; weight_decay may differ per group (it is added
             to each parameter's gradient in the hook).
    state_dict() carries the state's residuals and momentum under
    "pbox_topk"; load_state_dict() gives them back."""

    def __init__(self, params, state, lr=_torch_required, momentum=0.0, dampening=0.0,
                 weight_decay=0.0, nesterov=False):
        if not isinstance(state, TopkState):
            raise TypeError(f"TopkSGD needs a pbox.torch.TopkState, not {type(state).__name__}")
        if dampening:
            raise ValueError("TopkSGD: dampening is not supported (momentum correction "
                             "accumulates u = m u + g)")
        momentum = _real_arg("momentum", momentum)
        if not 0 <= momentum < 1:
            raise ValueError(f"TopkSGD: momentum {momentum} is outside [0, 1)")
        if nesterov and momentum <= 0:
            raise ValueError("TopkSGD: Nesterov momentum requires a momentum > 0")
        if state.local is not None:
            raise ValueError("TopkSGD: hierarchical top-k (TopkState(local=...)) keeps its "
                             "momentum in libpbox; use torch.optim.SGD with "
                             "TopkState(momentum=...) there")
        if state.momentum and state.momentum != momentum:
            raise ValueError(f"TopkSGD: momentum {momentum:g} but the TopkState was made with "
                             f"momentum {state.momentum:g}")
        super().__init__(params, lr=lr, weight_decay=_real_arg("weight_decay", weight_decay))
        for g in self.param_groups:
            if g["weight_decay"] < 0:
                raise ValueError(f"TopkSGD: weight_decay {g['weight_decay']} < 0")
        state.momentum = state.engine.momentum = momentum
        state.engine.nesterov = bool(nesterov)
        self.topk_state = state
        self._sync_decay()
        state.attach(self)

    def _sync_decay(self):
        self.topk_state.engine.weight_decay = {
            id(p): float(g["weight_decay"]) for g in self.param_groups for p in g["params"]
            if g["weight_decay"]}

    @torch.no_grad()
    def step(self, closure=None):
        """p -= lr * grad (the hook did momentum and weight decay)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._sync_decay()
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-g["lr"])
        return loss


def _client_of(client):
    if not isinstance(client, Client):
        raise TypeError(f"client must be a pbox.Client, not {type(client).__name__}")
    return client


def topk_allreduce(tensor, client, key, density=0.01, error_feedback=True, momentum=0.0,
                   local=None):
    """Sum `tensor` (a contiguous CPU float tensor) over all ranks in place,
    each rank sending about density of its entries (the largest of tensor
    + the key's residual); returns tensor holding the dense sum. key: an
    int of your own (2**31 and above keep clear of the hooks').
    local=(local_rank, local_size): hierarchical (TopkState's local)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor must be a torch.Tensor, not {type(tensor).__name__}")
    return _client_of(client).allreduce_topk(tensor, key, density,
                                             error_feedback=error_feedback, momentum=momentum,
                                             local=local)


def sparse_allreduce(t, client, key, out=None):
    """Sum a sparse tensor over all ranks: t is a torch sparse COO tensor
    (any shape) or a tuple (indices, values, size) of 1-D indices into a
    flat tensor of `size` elements. Returns the dense sum (out, if given: a
    contiguous tensor of t's shape and dtype). Every rank passes the same
    shape and dtype; its entries may differ."""
    client = _client_of(client)
    if isinstance(t, tuple):
        if len(t) != 3:
            raise TypeError("sparse_allreduce takes a sparse COO tensor or (indices, values, size)")
        idx, values, size = t
        shape = (int(size),)
        values = torch.as_tensor(values)
        idx = torch.as_tensor(idx).reshape(-1)
        if values.numel() != idx.numel():   # one value per index, or entries go astray
            raise Error(EINVAL, f"sparse_allreduce: {idx.numel()} indices but "
                                f"{values.numel()} values")
        order = torch.argsort(idx)
        idx, values = idx[order], values.reshape(-1)[order].contiguous()
        if idx.numel() > 1 and bool((idx[1:] == idx[:-1]).any()):
            raise ValueError("sparse_allreduce: repeated indices (coalesce them first)")
    elif isinstance(t, torch.Tensor) and t.is_sparse:
        t = t.coalesce()
        shape = tuple(t.shape)
        ind = t.indices()
        idx = torch.zeros(ind.shape[1], dtype=torch.int64)
        for d in range(ind.shape[0]):   # row-major linear index, sorted by coalesce
            idx = idx * shape[d] + ind[d]
        values = t.values().contiguous()
        if values.dim() != 1:
            raise ValueError("sparse_allreduce: hybrid sparse tensors (dense values) are not "
                             "supported")
    else:
        raise TypeError("sparse_allreduce takes a sparse COO tensor or (indices, values, size); "
                        "for a dense tensor use topk_allreduce or Client.allreduce")
    n = 1
    for s in shape:
        n *= s
    if out is None:
        out = torch.empty(shape, dtype=values.dtype)
    elif tuple(out.shape) != shape or out.dtype != values.dtype or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {values.dtype} tensor of shape {shape}")
    client.allreduce_sparse(idx, values, out.view(-1), key)
    return out


HOOKS = {"fp32": allreduce_hook, "fp16": fp16_compress_hook, "bf16": bf16_compress_hook,
         "topk": topk_hook}

# DDP.register_comm_hook special-cases hooks by __name__ (torch 1.13 refuses a
# hook named "bf16_compress_hook" without CUDA/NCCL); ours need no such check.
for _name, _h in HOOKS.items():
    _h.__name__ = _h.__qualname__ = f"pbox_{_h.__name__}"
del _name, _h


# ---- PS mode: BoxOptimizer -------------------------------------------------
#
# The box keeps the fp32 weights and the optimizer state of every parameter
# bucket (a PS key); a step pushes the bucket's gradients and gets the
# updated weights back in the same round trip (include/pbox.h "PS mode",
# docs/pytorch.md "PS mode: BoxOptimizer"). Keys: 2**31 | 31 bits of a hash
# of (name, group, bucket, numel, dtype), so that every rank derives the
# same keys from the same model, apart from the DDP hooks' 0..2**31-1.

_PS_KEY_BIT = 0x80000000
_TORCH_PBOX_DTYPE = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}

# PyTorch's hyperparameters and defaults (torch.optim.SGD, Adam, AdamW)
_REQUIRED = _torch_required
_HYPER = {
    "sgd": {"lr": _REQUIRED, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0,
            "nesterov": False},
    "adam": {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0},
    "adamw": {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2},
}
# torch.optim flags the box does not implement: accepted only off
_FLAGS = {
    "sgd": ("maximize", "foreach", "differentiable"),
    "adam": ("amsgrad", "maximize", "foreach", "capturable", "differentiable", "fused"),
    "adamw": ("amsgrad", "maximize", "foreach", "capturable", "differentiable", "fused"),
}


def ps_key_for(name, group, index, numel, dtype):
    """The PS key BoxOptimizer uses for bucket `index` of param group
    `group`: 2**31 | 31 bits of BLAKE2b over (name, group, index, numel,
    dtype). The same on every rank."""
    dt = _DTYPE_NAME.get(dtype, str(dtype))
    h = hashlib.blake2b(f"pbox-ps|{name}|{group}|{index}|{numel}|{dt}".encode(), digest_size=8)
    return _PS_KEY_BIT | (int.from_bytes(h.digest(), "little") & _KEY_MASK)


def _real(name, v, lo, hi=None, lo_open=False, hi_open=False, why=""):
    """float(v) if finite and within [lo, hi] (open ends as told), else
    ValueError naming the hyperparameter, the range and why."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if ok:
        v = float(v)
        ok = (v > lo if lo_open else v >= lo) and (
            hi is None or (v < hi if hi_open else v <= hi))
    if not ok:
        rng = f"{'>' if lo_open else '>='} {lo:g}"
        if hi is not None:
            rng += f" and {'<' if hi_open else '<='} {hi:g}"
        raise ValueError(f"BoxOptimizer: {name}={v!r} is out of range: must be finite, {rng}"
                         f"{why}")
    return v


def _flags_on(kind, g):
    """The torch.optim flags the box does not run that group g turns on."""
    return [f for f in _FLAGS[kind] if g.get(f)]


def _check_hyper(kind, g):
    """Validate one param group's hyperparameters (ValueError naming the
    first bad one); return the ones declared on the box, normalised."""
    on = _flags_on(kind, g)
    if on:
        raise ValueError(f"BoxOptimizer: a param group has {', '.join(on)} on, which the box "
                         f"does not run (plain {kind})")
    hp = {"weight_decay": _real("weight_decay", g["weight_decay"], 0)}
    _real("lr", g["lr"], 0)
    if kind == "sgd":
        hp["momentum"] = _real("momentum", g["momentum"], 0, 1, hi_open=True,
                               why=" (the box's SGD needs momentum < 1)")
        hp["dampening"] = _real("dampening", g["dampening"], 0, 1)
        if not isinstance(g["nesterov"], bool):
            raise ValueError(f"BoxOptimizer: nesterov={g['nesterov']!r} is not True or False")
        hp["nesterov"] = g["nesterov"]
        if hp["nesterov"] and (hp["momentum"] <= 0 or hp["dampening"] != 0):
            raise ValueError("BoxOptimizer: Nesterov momentum requires a momentum > 0 and zero "
                             "dampening (as torch.optim.SGD)")
        return hp
    betas = g["betas"]
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"BoxOptimizer: betas={betas!r} is not a pair of numbers")
    hp["betas"] = (_real("betas[0]", betas[0], 0, 1, hi_open=True),
                   _real("betas[1]", betas[1], 0, 1, hi_open=True))
    hp["eps"] = _real("eps", g["eps"], 0, lo_open=True)
    return hp


def _same_hyper(declared, g):
    """The names of hyperparameters of group g that differ from what the
    box was declared with."""
    out = []
    for name, v in declared.items():
        w = g.get(name)
        if name == "betas":
            same = isinstance(w, (tuple, list)) and len(w) == 2 and \
                tuple(float(x) for x in w) == v
        elif name == "nesterov":
            same = w == v
        else:
            same = isinstance(w, (int, float)) and not isinstance(w, bool) and float(w) == v
        if not same:
            out.append(f"{name} (declared {v!r}, now {w!r})")
    return out


class _Bucket:
    """Parameters of one param group and dtype, flattened into one PS key."""

    __slots__ = ("key", "group", "index", "params", "offsets", "numel", "dtype", "grad",
                 "weights", "req", "ready", "versions")

    def __init__(self, group, index, params, dtype):
        self.group, self.index, self.params, self.dtype = group, index, params, dtype
        self.offsets = []
        n = 0
        for p in params:
            self.offsets.append(n)
            n += p.numel()
        self.numel = n
        self.key = None
        self.grad = torch.zeros(n, dtype=dtype)      # the gradients pushed
        self.weights = torch.zeros(n, dtype=dtype)   # the weights pulled
        self.req = None        # the push_pull in flight, between push and step()
        self.ready = set()     # overlap: indices of params whose grad is ready
        self.versions = None   # overlap: (grad, grad._version) of each param at push

    def slices(self, flat):
        for p, off in zip(self.params, self.offsets):
            yield p, flat[off:off + p.numel()].view(p.shape)


class BoxOptimizer(torch.optim.Optimizer):
    """An optimizer that runs on the pbox box (PS mode): a drop-in for
    torch.optim.SGD, Adam and AdamW in a script without DDP.

    BoxOptimizer(params, optimizer="sgd", client=None, *, name="ps",
                 bucket_mb=4, overlap=False, **hyperparameters)

      params:    as torch.optim (tensors, or dicts of param groups); CPU
                 tensors of float32, float16 or bfloat16.
      optimizer: "sgd", "adam" or "adamw", with PyTorch's hyperparameters
                 and defaults: lr (required for SGD), momentum, dampening,
                 weight_decay, nesterov; lr, betas, eps, weight_decay
                 (AdamW's default 1e-2, decoupled). Flags the box does not
                 implement (amsgrad, maximize, foreach, capturable,
                 differentiable, fused) are accepted only off.
      client:    a pbox.Client (default pbox.Client() from the environment,
                 closed by close()).
      name:      separates the keys of several BoxOptimizers on one client.
      bucket_mb: parameters of a group are flattened into buckets of about
                 this size, one PS key each.
      overlap:   True starts a bucket's push during backward() as soon as all
                 its gradients are ready; step() then only waits. Gradients
                 must then not change between backward() and step() (no
                 clipping, no second backward for accumulation): step()
                 raises if they did. Default False: step() pushes.

    Construction is collective: every rank builds it with the same model
    and arguments; it declares the keys on the box, and every rank's
    parameters become rank 0's (the box's copy). step() pushes each
    bucket's gradients (a parameter without .grad counts as zeros) with its
    group's current lr (schedulers work) and writes the returned weights
    into the parameters; the box averages the gradients over the ranks (in
    rank order, fp32) and applies torch 1.13's update in fp32, so every
    rank holds the same bits. Only lr may change after construction; other
    hyperparameters are fixed on the box (step() raises if a group's
    changed). Parameters with requires_grad=False at construction stay on
    the worker and are never updated.

    State: the optimizer state lives on the box. state_dict() reads it back
    into torch's layout (momentum_buffer; step, exp_avg, exp_avg_sq) and
    load_state_dict() writes it, with the parameters' current values as the
    box's weights (load the model first). state_dict() may be called by any
    rank alone between its own steps (no round completes without that
    rank's next push, so the copy is consistent): `if rank == 0:
    torch.save(opt.state_dict(), f)` works. load_state_dict() is
    collective: every rank calls it at the same point between steps (rank
    0 writes, every rank then takes the weights back); it ends with a
    barrier on the box. The box can also checkpoint a job itself: `pboxctl
    job save` (docs/operations.md).

    A box restart (docs/reliability.md "A box restart"): the box comes back
    with its last checkpoint (pboxd --checkpoint-dir). With replay_steps=K
    every rank keeps its last K steps' gradients (K times the model's size)
    and pushes again those the checkpoint lacks: training goes on as if the
    box had not stopped (replays counts it); keep K above the steps between
    the box's saves (--checkpoint-every). Without it, or when the
    checkpoint is older, the parameters become the checkpoint's,
    restored_step says its step and a warning names the steps to replay.
    """

    def __init__(self, params, optimizer="sgd", client=None, *, name="ps", bucket_mb=4,
                 overlap=False, replay_steps=0, **hyper):
        if not isinstance(optimizer, str) or optimizer.lower() not in _HYPER:
            raise ValueError(f"BoxOptimizer: unknown optimizer {optimizer!r}: the box runs "
                             "'sgd', 'adam' and 'adamw'")
        kind = optimizer.lower()
        defaults = dict(_HYPER[kind])
        for flag in _FLAGS[kind]:
            if flag in hyper:
                if hyper.pop(flag):
                    raise ValueError(f"BoxOptimizer: {flag}={True!r} is not supported: the "
                                     f"box runs plain {kind} (leave {flag} off)")
        unknown = sorted(set(hyper) - set(defaults))
        if unknown:
            raise TypeError(f"BoxOptimizer({kind!r}) got unexpected hyperparameters "
                            f"{', '.join(unknown)} (it takes {', '.join(defaults)})")
        defaults.update(hyper)
        if not (isinstance(bucket_mb, (int, float)) and 0 < bucket_mb <= 1024):
            raise ValueError(f"BoxOptimizer: bucket_mb={bucket_mb!r} must be in (0, 1024]")
        if not (isinstance(replay_steps, int) and not isinstance(replay_steps, bool)
                and 0 <= replay_steps <= 100000):
            raise ValueError(f"BoxOptimizer: replay_steps={replay_steps!r} must be a whole "
                             "number of steps, 0 .. 100000")
        self.replay_steps = replay_steps
        self._history = {}      # replay_steps: key -> deque of (box step, grad, lr)
        self._box_steps = {}    # replay_steps: key -> the box's steps of the key
        self.kind = kind
        self.name = str(name)
        self.overlap = bool(overlap)
        self._bucket_bytes = max(1, int(bucket_mb * 2 ** 20))
        self._buckets = []
        self._declared = []     # per group: the hyperparameters on the box
        self._keys = {}         # key -> bucket
        self._grad_accs = []    # overlap: AccumulateGrad nodes (kept alive)
        self._grad_hooks = []   # overlap: their hooks' handles (removed by close())
        self._fixed = set()     # ids of params kept on the worker (requires_grad=False)
        self._taken = 0         # steps completed (restored_step after a box restart)
        self._rejoins = 0       # the client's rejoins seen (a box restart: PBOX_RESUME)
        self.restored_step = None  # the box's step after it restarted from a checkpoint
        self.replays = 0        # box restarts replayed (replay_steps)
        self._ready = False
        self._own_client = client is None
        self.client = client
        super().__init__(params, defaults)     # checks every group: nothing declared yet
        if self.client is None:
            self.client = Client()
        try:
            for i in range(len(self.param_groups)):
                self._setup_group(i)
            self._ready = True
        except BaseException:
            if self._own_client:
                self.client.close()
            raise

    # -- set-up ------------------------------------------------------------
    def add_param_group(self, param_group):
        """As torch.optim; after construction it is collective (every rank
        adds the same group) and declares the group's keys on the box."""
        if self._ready and any(b.req is not None for b in self._buckets):
            raise RuntimeError("BoxOptimizer: add_param_group while pushes are in flight "
                               "(call it between step() and the next backward)")
        super().add_param_group(param_group)
        g = self.param_groups[-1]
        try:
            _check_hyper(self.kind, g)
            for p in g["params"]:
                if p.device.type != "cpu":
                    raise ValueError(f"BoxOptimizer: a parameter is on {p.device}; the box "
                                     "takes CPU tensors only for now")
                if p.dtype not in _TORCH_PBOX_DTYPE:
                    raise ValueError(f"BoxOptimizer: a parameter has dtype {p.dtype} "
                                     "(float32, float16 or bfloat16)")
        except ValueError:
            self.param_groups.pop()
            raise
        if self._ready:
            self._setup_group(len(self.param_groups) - 1)

    def _setup_group(self, gi):
        g = self.param_groups[gi]
        self._declared.append(_check_hyper(self.kind, g))
        params = []
        for p in g["params"]:
            if p.requires_grad:
                params.append(p)
            else:
                self._fixed.add(id(p))
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            group = [p for p in params if p.dtype == dtype]
            for b in self._pack(gi, group, dtype):
                self._declare(b)
                self._init(b)
                if self.overlap:
                    self._hook(b)

    def _pack(self, gi, params, dtype):
        """Buckets of params (in order) of about the bucket size each."""
        out, cur, size = [], [], 0
        itemsize = torch.tensor([], dtype=dtype).element_size()
        for p in params:
            nb = p.numel() * itemsize
            if cur and size + nb > self._bucket_bytes:
                out.append(cur)
                cur, size = [], 0
            if p.numel():
                cur.append(p)
                size += nb
        if cur:
            out.append(cur)
        first = sum(1 for b in self._buckets if b.group == gi)
        return [_Bucket(gi, first + i, ps, dtype) for i, ps in enumerate(out)]

    def _declare(self, b):
        key = ps_key_for(self.name, b.group, b.index, b.numel, b.dtype)
        if key in self._keys or key in self.client._ps:
            raise Error(EINVAL, f"BoxOptimizer '{self.name}': bucket {b.index} of group "
                                f"{b.group} hashes to PS key {key}, already in use on this "
                                "client; give the BoxOptimizer another name")
        g, hp = self.param_groups[b.group], self._declared[b.group]
        kw = {"lr": g["lr"], "weight_decay": hp["weight_decay"]}
        if self.kind == "sgd":
            kw.update(momentum=hp["momentum"], dampening=hp["dampening"],
                      nesterov=hp["nesterov"])
        else:
            kw.update(betas=hp["betas"], eps=hp["eps"])
        wdt = _TORCH_PBOX_DTYPE[b.dtype]
        self.client.declare_optimizer(key, b.numel, wdt, self.kind, weights_dtype=wdt, **kw)
        b.key = key
        self._keys[key] = b
        self._buckets.append(b)

    @torch.no_grad()
    def _init(self, b):
        """The key's first round: rank 0's weights up, the box's copy into
        every rank's parameters."""
        up = None
        if self.client.rank == 0:
            up = torch.empty(b.numel, dtype=torch.float32)
            for p, dst in b.slices(up):
                dst.copy_(p)
        self.client.ps_init(b.key, up, b.weights)
        for p, src in b.slices(b.weights):
            p.copy_(src)
        if self.replay_steps and b.key not in self._box_steps:
            # the box's steps of the key (a job restored at its start has some)
            self._box_steps[b.key] = self.client.ps_read(
                b.key, torch.empty(b.numel, dtype=torch.float32))
            self._history[b.key] = collections.deque(maxlen=self.replay_steps)

    def _hook(self, b):
        with torch.enable_grad():
            for i, p in enumerate(b.params):
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                self._grad_hooks.append(acc.register_hook(self._grad_ready(b, i)))
                self._grad_accs.append(acc)

    def _unhook(self):
        """Remove the overlap hooks: the parameters' AccumulateGrad nodes
        outlive the optimizer (they are the parameters'), and a hook left
        there would push this optimizer's keys in every later backward,
        e.g. one for another optimizer of the same model."""
        for h in self._grad_hooks:
            h.remove()
        self._grad_hooks, self._grad_accs = [], []

    def _grad_ready(self, b, i):
        ref = weakref.ref(self)    # the node's hook must not keep the optimizer alive

        def hook(*_):
            opt = ref()
            if opt is None:        # dropped without close()
                return
            if b.req is not None:
                raise RuntimeError(
                    f"BoxOptimizer(overlap=True): a gradient of bucket {b.index} of group "
                    f"{b.group} changed after the bucket was pushed (a second backward "
                    "before step(), e.g. gradient accumulation); use overlap=False")
            b.ready.add(i)
            if len(b.ready) == len(b.params):
                opt._push(b)
        return hook

    # -- steps --------------------------------------------------------------
    @torch.no_grad()
    def _push(self, b):
        """Flatten b's gradients and start its push_pull with its group's lr."""
        versions = []
        for p, dst in b.slices(b.grad):
            g = p.grad
            if g is None:
                dst.zero_()
            elif g.is_sparse:
                raise RuntimeError("BoxOptimizer: sparse gradients are not supported")
            else:
                dst.copy_(g)
            versions.append((g, g._version if g is not None else None))
        b.versions = versions
        self.client.set_lr(b.key, float(self.param_groups[b.group]["lr"]))
        b.req = self.client.ipush_pull(b.key, b.grad, b.weights)

    @staticmethod
    def _stale(b):
        """True if a gradient of b changed after b was pushed."""
        if b.versions is None:
            return False
        for p, (g, v) in zip(b.params, b.versions):
            if p.grad is not g or (g is not None and g._version != v):
                return True
        return False

    def _check_groups(self):
        for gi, g in enumerate(self.param_groups):
            changed = _same_hyper(self._declared[gi], g)
            if changed:
                raise ValueError(f"BoxOptimizer: param group {gi} changed {', '.join(changed)}; "
                                 "only lr can change after construction (the box holds the "
                                 "others; e.g. OneCycleLR needs cycle_momentum=False)")
            _real("lr", g["lr"], 0)
        for g in self.param_groups:
            for p in g["params"]:
                if id(p) in self._fixed and p.grad is not None:
                    raise RuntimeError("BoxOptimizer: a parameter that had requires_grad=False "
                                       "at construction has a gradient; it is not on the box "
                                       "(add it with add_param_group)")

    @torch.no_grad()
    def step(self, closure=None):
        """Push every bucket's gradients (those overlap did not push yet),
        wait for the updated weights and write them into the parameters.
        Returns closure's loss if given. If a lost rank was replaced during
        the step (a job with a replacement window, PBOX_REPLACE_WAIT), the
        parameters become the box's weights and the step is not repeated.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        first = None
        try:
            self._check_groups()
            for b in self._buckets:
                if b.req is None:
                    self._push(b)
        except BaseException as e:  # nothing more is pushed; what is in flight is waited for
            first = e
        stale = [b for b in self._buckets if b.req is not None and self._stale(b)]
        done, first = self._drain(first)
        # the box applied every step that completed: take its weights, so
        # that all ranks keep holding the same bits whatever failed
        for b in done:
            for p, src in b.slices(b.weights):
                p.copy_(src)
            if self.replay_steps:   # what a restarted box may need again
                self._box_steps[b.key] += 1
                self._history[b.key].append((self._box_steps[b.key], b.grad.clone(),
                                             float(self.param_groups[b.group]["lr"])))
        if isinstance(first, Error) and first.code == EAGAIN:
            # a lost rank was replaced (docs/reliability.md "Replacing a
            # lost rank"): the box kept its weights and every key's next
            # round hands them back; this step stays applied where it
            # completed on the box and is not repeated. Or the box
            # restarted ("A box restart"): the weights are its checkpoint's
            for b in self._buckets:
                self._init(b)
            if self._after_restart([b for b in self._buckets if b not in done]):
                self._taken += 1   # (replayed: this step is applied)
            first = None
        elif first is None:
            self._taken += 1
        if first is not None:
            raise first
        if stale:
            b = stale[0]
            raise RuntimeError(
                f"BoxOptimizer(overlap=True): gradients of bucket {b.index} of group {b.group} "
                "were modified after backward pushed them (e.g. clip_grad_norm_, a second "
                "backward, zero_grad before step()); the box applied the pushed ones. Use "
                "overlap=False to change gradients between backward and step()")
        return loss

    def _replay(self, failed):
        """After a box restart: push again, key by key, the gradients of
        the steps the box's checkpoint lacks (kept by replay_steps), then
        this step's of the keys whose push failed; every rank does the
        same, so the box's state becomes what it was, bit for bit. True
        if every key could be replayed."""
        scratch = {}
        plan = []
        for b in self._buckets:
            buf = scratch.setdefault(b.numel, torch.empty(b.numel, dtype=torch.float32))
            steps = self.client.ps_read(b.key, buf)
            hist = [h for h in self._history.get(b.key, ()) if h[0] > steps]
            if steps < self._box_steps.get(b.key, 0) and (
                    not hist or hist[0][0] != steps + 1):
                return False
            plan.append((b, steps, hist))
        for b, steps, hist in plan:
            # (a checkpoint taken after the failed step's round completed
            # at the box already holds it: not pushed twice)
            again = b in failed and steps <= self._box_steps.get(b.key, 0)
            if b in failed and not again:
                self._history[b.key].append((steps, b.grad.clone(),
                                             float(self.param_groups[b.group]["lr"])))
            for step, grad, lr in hist:
                self.client.set_lr(b.key, lr)
                self.client.push_pull(b.key, grad, b.weights)
            self._box_steps[b.key] = hist[-1][0] if hist else steps
            if again:
                self.client.set_lr(b.key, float(self.param_groups[b.group]["lr"]))
                self.client.push_pull(b.key, b.grad, b.weights)
                self._box_steps[b.key] += 1
                self._history[b.key].append((self._box_steps[b.key], b.grad.clone(),
                                             float(self.param_groups[b.group]["lr"])))
            for p, src in b.slices(b.weights):
                p.copy_(src)
        return True

    def _after_restart(self, failed):
        """After a step failed EAGAIN: if the client rejoined a restarted
        box, its weights (now the parameters) are those of the checkpoint
        it restored. With replay_steps, the steps since are pushed again
        (_replay) and training goes on as if the box had not stopped;
        else say which step, for the training loop to replay from
        (restored_step); a box that restored none started from this
        rank 0's parameters and lost the optimizer state."""
        rejoins = self.client.stats()["rejoins"]
        if rejoins == self._rejoins:
            return False
        self._rejoins = rejoins
        import warnings
        if self.replay_steps and self._replay(failed):
            self.replays += 1
            return True
        b = self._buckets[0]
        steps = self.client.ps_read(b.key, torch.empty(b.numel, dtype=torch.float32))
        if self.replay_steps:
            warnings.warn(f"BoxOptimizer '{self.name}': the box restarted from a checkpoint "
                          f"older than the last {self.replay_steps} steps kept "
                          "(replay_steps): they cannot be replayed", RuntimeWarning)
        if steps == 0:
            warnings.warn(f"BoxOptimizer '{self.name}': the box restarted without a checkpoint "
                          f"of this job (pboxd --checkpoint-dir): training goes on from rank "
                          f"0's parameters after step {self._taken}, the optimizer state "
                          "(momentum, Adam's moments) starts afresh", RuntimeWarning)
            return False
        warnings.warn(f"BoxOptimizer '{self.name}': the box restarted and restored its "
                      f"checkpoint of step {steps}; this optimizer had taken {self._taken} "
                      f"steps: the parameters are step {steps}'s again, replay the data of "
                      f"steps {steps + 1}..{self._taken} (restored_step) to train as if it "
                      "had not stopped", RuntimeWarning)
        self.restored_step = steps
        self._taken = steps
        return False

    def _drain(self, first=None):
        """Wait for every push in flight. Returns (the buckets whose step
        completed, the first error or `first`)."""
        done = []
        for b in self._buckets:
            r, b.req = b.req, None
            b.ready = set()
            b.versions = None
            if r is None:
                continue
            try:
                r.wait()
                done.append(b)
            except BaseException as e:
                first = first or e
        return done, first

    # -- state ----------------------------------------------------------------
    def _barrier(self, what):
        """Every rank has reached this point: a 1-float allreduce on a plain
        key of this optimizer's."""
        key = ps_key_for(self.name, "barrier", 0, 1, torch.float32)
        try:
            self.client.allreduce(torch.zeros(1), key)
        except Error as e:
            if e.code == ETIMEDOUT:
                raise Error(e.code, f"BoxOptimizer.{what}() is collective: every rank calls "
                                    f"it at the same point ({e.message})") from e
            raise

    def _read(self, b, part, what):
        buf = torch.empty(b.numel, dtype=torch.float32)
        try:
            steps = self.client.ps_read(b.key, buf, part)
        except Error as e:
            if e.code == EBUSY:
                raise Error(e.code, f"BoxOptimizer.{what}() found the key's segments at "
                                    f"different steps: call it between this rank's steps "
                                    f"({e.message})") from e
            raise
        return buf, steps

    def state_dict(self):
        """torch's optimizer state_dict, with the state read back from the
        box: per parameter, SGD {'momentum_buffer', 'step'}, Adam(W)
        {'step', 'exp_avg', 'exp_avg_sq'} ('step' a float tensor, as
        torch 1.13; the others float32, the box's precision, also for
        16-bit parameters: torch.optim's load_state_dict casts them to the
        parameter's dtype, a BoxOptimizer's keeps them). Any rank, alone,
        between its steps."""
        if any(b.req is not None for b in self._buckets):
            raise RuntimeError("BoxOptimizer.state_dict() between steps only (pushes are in "
                               "flight: call step() first)")
        sd = super().state_dict()
        # the index torch gave each parameter (with a parameter twice in a
        # group, torch's, not its first position)
        index = {}
        for g, packed in zip(self.param_groups, sd["param_groups"]):
            for p, i in zip(g["params"], packed["params"]):
                index[id(p)] = i
        state = {}
        for b in self._buckets:
            names = self._state_names(b)
            arrays, steps = [], 0
            for i in range(len(names)):
                buf, steps = self._read(b, f"state{i}", "state_dict")
                arrays.append(buf)
            if steps == 0:      # SGD without momentum has no state (torch: None)
                continue
            for i, p in enumerate(b.params):
                off, n = b.offsets[i], p.numel()
                st = {"step": torch.tensor(float(steps))}
                for name, a in zip(names, arrays):
                    st[name] = a[off:off + n].view(p.shape).clone()
                state[index[id(p)]] = st
        sd["state"] = state
        return sd

    def load_state_dict(self, state_dict):
        """Load a state_dict (of a BoxOptimizer, or of torch.optim.SGD, Adam,
        AdamW with the same hyperparameters): param groups as torch does;
        rank 0 writes the parameters' current values as the box's weights
        and the state to the box, then every rank reads the weights back
        into its parameters. Collective (class docstring)."""
        if any(b.req is not None for b in self._buckets):
            raise RuntimeError("BoxOptimizer.load_state_dict() between steps only (pushes "
                               "are in flight: call step() first)")
        groups = state_dict.get("param_groups", [])
        if len(groups) != len(self.param_groups):
            raise ValueError(f"BoxOptimizer: the state_dict has {len(groups)} param groups, "
                             f"this optimizer {len(self.param_groups)}")
        for gi, g in enumerate(groups):
            on = _flags_on(self.kind, g)
            if on:
                raise ValueError(f"BoxOptimizer: param group {gi} of the state_dict has "
                                 f"{', '.join(on)} on, which the box does not run")
            changed = _same_hyper(self._declared[gi], g)
            if changed:
                raise ValueError(f"BoxOptimizer: param group {gi} of the state_dict has "
                                 f"other hyperparameters than the box: {', '.join(changed)}")
        # the state as given: torch's load casts it to the parameters' dtype,
        # which for 16-bit parameters would round the box's fp32 state (an
        # exp_avg_sq of float16 underflows to 0)
        given = {}
        saved = [i for g in groups for i in g.get("params", [])]
        mine = [p for g in self.param_groups for p in g["params"]]
        if len(saved) == len(mine):           # else torch's load raises
            to = dict(zip(saved, mine))
            for k, v in state_dict.get("state", {}).items():
                if k in to and isinstance(v, dict):
                    given[to[k]] = v
        super().load_state_dict(state_dict)   # param groups; self.state cast to the params
        for p, v in given.items():
            self.state[p] = dict(v)
        try:
            # checked on every rank before rank 0 writes anything, so that a
            # bad state_dict fails everywhere instead of leaving the others
            # waiting in the barrier
            steps = [self._loaded_steps(b) for b in self._buckets]
            if self.client.rank == 0:
                for b, n in zip(self._buckets, steps):
                    self._write(b, n)
        finally:
            self.state.clear()
        self._barrier("load_state_dict")
        with torch.no_grad():
            for b in self._buckets:
                w, _ = self._read(b, "weights", "load_state_dict")
                for p, src in b.slices(w):
                    p.copy_(src)
        self._barrier("load_state_dict")

    def _state_names(self, b):
        """torch's names of the box's state planes of b's key (state0, state1)."""
        if self.kind != "sgd":
            return ["exp_avg", "exp_avg_sq"]
        return ["momentum_buffer"] if self._declared[b.group]["momentum"] != 0 else []

    def _loaded_steps(self, b):
        """The step count of b's parameters in self.state (a loaded
        state_dict; torch.optim.SGD's has none: 1 with a momentum buffer),
        checked: one per key, state tensors of the parameters' shapes.

        SGD: the box tells only the first step (the buffer starts as the
        gradient) from the later ones, so counts >= 1 are alike (the
        largest is kept); a parameter without a buffer (one that
        torch.optim.SGD never stepped, e.g. unused) next to ones with it
        gets a zero buffer, which with dampening 0 continues exactly as
        torch starts one (momentum * 0 + gradient). Adam(W)'s bias
        correction needs each count as it is."""
        steps, none = {}, []
        names = self._state_names(b)
        for i, p in enumerate(b.params):
            st = self.state.get(p, {})
            s = st.get("step")
            if s is None:
                s = 1 if st.get("momentum_buffer") is not None else 0
            s = int(float(s))
            if s == 0 or (names and all(st.get(n) is None for n in names)):
                none.append(i)
            else:
                steps.setdefault(s, i)
            for name in names:
                v = st.get(name)
                if v is not None and tuple(v.shape) != tuple(p.shape):
                    raise ValueError(f"BoxOptimizer: state {name} has shape {tuple(v.shape)}, "
                                     f"its parameter {tuple(p.shape)}")
        where = f"bucket {b.index} of group {b.group} (one PS key)"
        if self.kind == "sgd":
            damp = self._declared[b.group]["dampening"]
            if none and steps and damp != 0:
                raise ValueError(
                    f"BoxOptimizer: in the state_dict, parameter "
                    f"{tuple(b.params[none[0]].shape)} of {where} has no momentum buffer and "
                    f"others have one; with dampening {damp:g} the box cannot start its "
                    "buffer as torch would (the box keeps one step count per key)")
            return max(steps) if steps else 0
        if len(steps) > 1 or (steps and none):
            have = ", ".join(f"{s} (parameter {tuple(b.params[i].shape)})"
                             for s, i in sorted(steps.items()))
            if none:
                have += f", none (parameter {tuple(b.params[none[0]].shape)}: no state, e.g. " \
                        "never stepped in the saved optimizer)"
            raise ValueError(f"BoxOptimizer: the parameters of {where} have different step "
                             f"counts in the state_dict: {have}; the box keeps one per key")
        return next(iter(steps)) if steps else 0

    @torch.no_grad()
    def _write(self, b, steps):
        """Rank 0: b's parameters as weights, and self.state's entries of
        them as the box's optimizer state and step count."""
        w = torch.empty(b.numel, dtype=torch.float32)
        for p, dst in b.slices(w):
            dst.copy_(p)
        self.client.ps_write(b.key, w, "weights")
        for i, name in enumerate(self._state_names(b)):
            # SGD without a momentum buffer (a fresh torch.optim.SGD's
            # state): written zeros would be continued by the first step
            # (buf = momentum * 0 + (1 - dampening) * g), where torch
            # starts the buffer as the gradient; not written, the box does
            # the same
            if self.kind == "sgd" and all(self.state.get(p, {}).get(name) is None
                                          for p in b.params):
                continue
            buf = torch.zeros(b.numel, dtype=torch.float32)
            for p, dst in b.slices(buf):
                v = self.state.get(p, {}).get(name)
                if v is not None:
                    dst.copy_(v)
            self.client.ps_write(b.key, buf, f"state{i}")
        self.client.ps_set_steps(b.key, steps)

    # -- lifetime -------------------------------------------------------------
    @property
    def keys(self):
        """[(key, group, numel, dtype)] of the buckets, in step order."""
        return [(b.key, b.group, b.numel, b.dtype) for b in self._buckets]

    def close(self):
        """Wait for pushes in flight, remove the overlap hooks (a later
        backward pushes nothing of this optimizer's); close the client if
        the optimizer made it."""
        self._unhook()
        _, first = self._drain()
        if self._own_client:
            self.client.close()
        if first is not None:
            raise first

    def __getstate__(self):
        raise TypeError("pbox.torch.BoxOptimizer cannot be pickled (its state is on the box: "
                        "use state_dict())")

    def __repr__(self):
        return (f"BoxOptimizer({self.kind}, {len(self._buckets)} keys, overlap={self.overlap}, "
                f"{super().__repr__()})")


# ---- the torch.distributed backend "pbox" ------------------------------------
# Importing pbox.torch registers it: dist.init_process_group("pbox") then
# runs DDP (no hook needed) and the collectives on the box (pbox/backend.py).
from .backend import ProcessGroupPBox, set_options as set_backend_options  # noqa: E402
from .daso import DASO  # noqa: E402,F401
