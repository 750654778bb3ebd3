# SPDX-License-Identifier: BSD-3-Clause
"""pbox.torch - PyTorch DDP communication hooks that sum gradients on a pbox.

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

Keys: pbox needs a key per buffer with the same size and dtype on every
rank, and every rank must use the same key. DDP numbers its buckets
0..n-1, but after the first iteration it rebuilds them in gradient-arrival
order, so the same index can then have another size. The hook's key is
therefore a hash of (State name, bucket index, element count, wire dtype)
truncated to 31 bits: identical on all ranks without any exchange, stable
across iterations, and a new key after a rebuild. Hook keys lie in
0..2**31-1; keys of your own should use 2**31 and above.
"""
import hashlib
import queue
import threading

import torch

from . import Client, Error, EINVAL

__all__ = ["State", "allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "key_for"]

_KEY_MASK = 0x7FFFFFFF
_DTYPE_NAME = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def key_for(name, index, numel, dtype):
    """The key the hooks use for a bucket: 31 bits of BLAKE2b over
    (name, index, numel, dtype). The same on every rank."""
    dt = _DTYPE_NAME.get(dtype, str(dtype))
    h = hashlib.blake2b(f"pbox-ddp|{name}|{index}|{numel}|{dt}".encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little") & _KEY_MASK


class State:
    """Per-model state of the pbox hooks.

    State(client=None, name="ddp", world=None)
      client: a pbox.Client (default: pbox.Client() from the environment);
              the State closes it at close() only if it made it.
      name:   separates the keys of several DDP models on one client
              (each model needs its own State with its own name).
      world:  divisor of the sum (default client.world).
    """

    def __init__(self, client=None, name="ddp", world=None):
        self._own_client = client is None
        self.client = client if client is not None else Client()
        self.name = str(name)
        self.world = int(world if world is not None else self.client.world)
        self._keys = {}        # (index, numel, dtype name) -> key
        self._owner = {}       # key -> (index, numel, dtype name)
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

    def key(self, index, numel, dtype):
        t = (int(index), int(numel), _DTYPE_NAME.get(dtype, str(dtype)))
        with self._klock:
            k = self._keys.get(t)
            if k is not None:
                return k
            k = key_for(self.name, index, numel, dtype)
            other = self._owner.get(k)
            if other is not None and other != t:
                raise Error(EINVAL, f"DDP buckets {other} and {t} hash to the same pbox key "
                                    f"{k}; give the State another name")
            self._keys[t] = k
            self._owner[k] = t
            return k

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
            req, finish, fut = item
            try:
                req.wait()
                res = finish()
            except BaseException as e:  # hand every failure to DDP via the future
                fut.set_exception(e if isinstance(e, Exception) else RuntimeError(str(e)))
                continue
            fut.set_result(res)

    def submit(self, buf, key, finish):
        """Start the sum of buf under key; return a Future completed with
        finish() (run on the waiter thread) once the sum is in buf."""
        fut = torch.futures.Future()
        # Python's set_exception stores the exception as the value; DDP (C++)
        # would then fail with "Unable to cast ... to Tensor". Chaining
        # .then() turns it into a real error of the returned future, so
        # backward() raises the pbox.Error's message.
        out = fut.then(_unwrap)
        try:
            req = self.client.iallreduce(buf, key)
        except Exception as e:
            fut.set_exception(e)
            return out
        self.calls += 1
        self._start()
        self._q.put((req, finish, fut))
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


def _bucket_buffer(bucket):
    buf = bucket.buffer()
    if buf.device.type != "cpu":
        raise Error(EINVAL, f"DDP bucket {bucket.index()} is on {buf.device}; the pbox hooks "
                            "handle CPU tensors only for now")
    return buf


def allreduce_hook(state, bucket):
    """Average the bucket over all ranks through the box, in its own dtype
    (float32, float16 or bfloat16 gradients)."""
    buf = _bucket_buffer(bucket)
    try:
        key = state.key(bucket.index(), buf.numel(), buf.dtype)
    except Exception as e:
        return _failed(e)
    world = state.world

    def finish():
        return buf.div_(world)

    return state.submit(buf, key, finish)


def _compress_hook(state, bucket, dtype):
    buf = _bucket_buffer(bucket)
    try:
        key = state.key(bucket.index(), buf.numel(), dtype)
    except Exception as e:
        return _failed(e)
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


HOOKS = {"fp32": allreduce_hook, "fp16": fp16_compress_hook, "bf16": bf16_compress_hook}

# DDP.register_comm_hook special-cases hooks by __name__ (torch 1.13 refuses a
# hook named "bf16_compress_hook" without CUDA/NCCL); ours need no such check.
for _name, _h in HOOKS.items():
    _h.__name__ = _h.__qualname__ = f"pbox_{_h.__name__}"
del _name, _h
