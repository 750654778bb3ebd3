# SPDX-License-Identifier: BSD-3-Clause
"""pbox.backend - torch.distributed's "pbox" backend: a process group whose
collectives run on the box.

    import torch.distributed as dist
    import pbox.torch                    # registers the backend
    dist.init_process_group("pbox")      # under torchrun; PBOX_CONTROL names the box
    model = torch.nn.parallel.DistributedDataParallel(model)   # no hook needed

What runs where (docs/pytorch.md "The pbox backend"):
  on the box, exact and loss-tolerant: allreduce and reduce (SUM, AVG),
  broadcast, allgather (all_gather, all_gather_into_tensor), reduce_scatter
  (reduce_scatter, reduce_scatter_tensor; SUM, AVG) and barrier, for dense
  CPU tensors of float32, float16 and bfloat16; allreduce and reduce (SUM,
  AVG) of such CUDA tensors too, staged through pinned host memory by
  libpbox's GPU library (docs/gpu.md): the call is ordered after the
  tensor's current stream, AVG's division is fused into the copy back, and
  the Work completes on that stream (nothing waits for the device on the
  host); without a GPU library or device the Work fails naming it;
  on an inner Gloo group built from the same store: everything else (other
  reduce ops, integer and bool tensors, gather, scatter, all_to_all,
  point-to-point, coalesced calls, monitored_barrier); torch 1.13's Gloo
  has no bfloat16, so there bfloat16 reductions run in float32, rounded
  once, and bfloat16 data moves as float16 bytes.

The job: rank 0 makes a job name and a join secret (random) and writes them
to the group's c10d store; every rank reads them there and joins the box
with them, so no environment variable names the job and no other program
can join it. The box's control address comes from set_options(control=...)
or $PBOX_CONTROL.

Keys: every collective uses a key per (operation, shape, dtype) and lane:
a call takes lane seq % LANES of its signature, seq counting the calls of
that signature, and first waits for the call that used the same lane
before. All ranks issue collectives in the same order (torch.distributed's
rule), so all pick the same key for a call without talking to each other.
The keys' box memory stays within half the job's (pbox_stats.key_bytes:
a key takes one contiguous block, and the other half leaves room for new
shapes among older blocks), so set_options(key_bytes=N) asks the box for
2 * N bytes of keys (the first rank's option counts) and the group's keys
may then hold N: set_options(key_bytes=key_bytes_for(model)) holds every
DDP bucket of the model at once. A call whose lane has no key yet shares
the least recently used key of another lane of its signature when a new
key would pass the budget (it waits for that key's last call); otherwise
the least recently used keys are released first (pbox_release_keys,
after their calls ended). Every rank makes the same choices from the same
calls.

Lifetime: the group leaves the box job and ends its waiter thread at
shutdown(), when it is garbage (dist.destroy_process_group() and no other
reference, such as a DDP model's) or at interpreter exit, whichever comes
first.

Each collective is one span "pbox::<op>" in torch.profiler, from its start
until its result is in.
"""
import collections
import hashlib
import os
import sys
import queue
import secrets
import threading
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (AllreduceOptions, PrefixStore, ProcessGroup,
                                        ProcessGroupGloo, ReduceOp, ReduceOptions,
                                        Work, _create_work_from_future)

from . import Client, Error, EINVAL, EABORTED, _cuda_stream, _env, _int_arg, _on_stream

__all__ = ["ProcessGroupPBox", "set_options", "LANES"]

LANES = 4                      # keys per signature: calls of one shape in flight at once
_KEY_MASK = 0x7FFFFFFF
_BOX_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_options = {}
_host_level_taken = False     # the process's default group has the host level
_STORE_JOB = "pbox/job"
_STORE_SECRET = "pbox/secret"


def set_options(**kw):
    """Client options for the process groups created from now on: control
    ("host:port", default $PBOX_CONTROL), job_bytes (job memory the first
    rank reserves; default $PBOX_JOB_BYTES, then the box's --job-bytes) or
    key_bytes (what the group's keys may hold, pbox.torch.key_bytes_for(
    model): the first rank sizes the job as the box's engine memory plus
    twice this, as the keys stay under half the job's key memory),
    transport, timeout_ms, rto_ms, window, mtu, busy_poll (pbox.Client's)."""
    known = {"control", "job_bytes", "key_bytes", "transport", "timeout_ms", "rto_ms",
             "window", "mtu", "busy_poll"}
    bad = set(kw) - known
    if bad:
        raise Error(EINVAL, f"unknown pbox backend options {sorted(bad)}; known: {sorted(known)}")
    _options.update(kw)


def _unwrap(fut):
    return fut.value()


def _boxable(t, cuda=False):
    """A tensor the box takes: dense, non-empty, of a box dtype, on the CPU
    (or on a CUDA device, where cuda is set: allreduce and reduce)."""
    devs = ("cpu", "cuda") if cuda else ("cpu",)
    return (isinstance(t, torch.Tensor) and t.device.type in devs and t.dtype in _BOX_DTYPES
            and t.layout == torch.strided and t.numel() > 0)


def _tensors(xs):
    """The tensors of xs: a tensor, or lists (of lists) of them."""
    if isinstance(xs, torch.Tensor):
        yield xs
    elif isinstance(xs, (list, tuple)):
        for x in xs:
            yield from _tensors(x)


# the inner Gloo group's collectives that reduce (the others move bytes)
_GLOO_REDUCING = {"allreduce", "reduce", "allreduce_coalesced", "reduce_scatter",
                  "_reduce_scatter_base"}


def _map_tensors(xs, fn):
    """xs with fn(t) for every tensor t in it (a tensor, or lists or tuples
    of them); anything else as it is."""
    if isinstance(xs, torch.Tensor):
        return fn(xs)
    if isinstance(xs, (list, tuple)):
        return type(xs)(_map_tensors(x, fn) for x in xs)
    return xs


def _overlapping(t):
    """t has elements that share memory (an expand()ed tensor: a stride 0
    over more than one element), which no result can be copied into."""
    if t.layout != torch.strided:
        return False
    has = getattr(torch, "_debug_has_internal_overlap", None)
    if has is not None:
        return has(t) == 1            # MemOverlap::Yes: what copy_ refuses
    return any(st == 0 and n > 1 for st, n in zip(t.stride(), t.size()))


def _check_outputs(name, *outputs):
    """Refuse a call whose output tensors overlap themselves, at once and
    before anything reaches the box or Gloo: the result could not be
    written back (the group would fail on its waiter thread, and Gloo
    writes such a tensor past its memory)."""
    for t in _tensors(outputs):
        if _overlapping(t):
            raise Error(EINVAL, f"{name}: an output tensor of size {tuple(t.shape)} has "
                                f"overlapping elements (stride {t.stride()}, e.g. from "
                                f"expand()); pass one with memory of its own (.clone())")


def _check_avg(name, dtype):
    """AVG on Gloo is a SUM divided by the world: refuse dtypes that cannot
    be divided (integers, bool) with EINVAL, as Gloo refuses AVG itself."""
    if not (dtype.is_floating_point or dtype.is_complex):
        raise Error(EINVAL, f"{name}: AVG of {dtype} tensors (the backend averages "
                            "floating-point tensors only)")


class _FutureWork(Work):
    """A barrier's Work over its future. torch 1.13's Work made from a
    future (_create_work_from_future) returns True from wait() whatever the
    future holds, so a failed dist.barrier() returned as if every rank had
    come; this one's wait() raises the call's failure (the abort's
    reason), as Gloo's does. (Only for calls made from Python: C++ callers,
    DDP's reducer, take a Work's future, which torch 1.13 does not ask a
    Python Work for; their failed calls poison the outputs, _fail.)"""

    def __init__(self, fut):
        super().__init__()
        self._fut = fut
        # wait() may be called from C++ (DDP, _broadcast_coalesced) with
        # the GIL taken back for it: it waits on an Event, which lets the
        # GIL go while the waiter thread completes the future
        self._done = threading.Event()
        fut.add_done_callback(lambda _: self._done.set())

    def wait(self, timeout=None):
        secs = timeout.total_seconds() if timeout is not None else 0
        if not self._done.wait(secs if secs > 0 else None):
            raise RuntimeError(f"pbox backend: Work.wait timed out after {secs} s")
        self._fut.wait()                 # raises what the call raised
        return True

    def get_future(self):
        return self._fut

    def is_completed(self):
        return self._fut.done()

    def is_success(self):
        if not self._fut.done():
            return False
        try:
            self._fut.value()
        except Exception:
            return False
        return True

    def exception(self):
        try:
            self._fut.value()
        except Exception as e:
            return e
        return None

    def result(self):
        return self._fut.value()

    def synchronize(self):
        self._fut.wait()


def _work(fut):
    """The Work of a call that completes fut: torch's own, whose future DDP's
    reducer takes from C++ (torch 1.13 does not ask a Python Work for it)."""
    return _create_work_from_future(fut)


def _complete(result):
    """A Work that is already complete, holding result."""
    fut = torch.futures.Future()
    fut.set_result(result)
    return _work(fut)


def _box_op(opts):
    """'sum', 'avg' or None (another op: Gloo's)."""
    op = opts.reduceOp
    if op == ReduceOp.SUM:
        return "sum"
    if op == ReduceOp.AVG:
        return "avg"
    return None


def _empty_like(out, inp):
    """out is an empty output that an empty inp's call may fill: the same
    dtype, device and (dense) layout, as Gloo checks for a non-empty one."""
    return (out.numel() == 0 and out.dtype == inp.dtype and out.device == inp.device and
            out.layout == inp.layout == torch.strided)


def _contiguous_out(t):
    """t, or a contiguous buffer to stage a non-contiguous output t through."""
    return t if t.is_contiguous() else torch.empty_like(t, memory_format=torch.contiguous_format)


class ProcessGroupPBox(ProcessGroup):
    """A torch.distributed process group on a pbox (module docstring)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._gloo = ProcessGroupGloo(PrefixStore("pbox-gloo/", store), rank, size, timeout)
        if rank == 0:
            job, secret = "pg-" + secrets.token_hex(8), secrets.token_hex(24)
            store.set(_STORE_SECRET, secret)
            store.set(_STORE_JOB, job)
        else:
            job = store.get(_STORE_JOB).decode()
            secret = store.get(_STORE_SECRET).decode()
        kw = {k: v for k, v in _options.items() if k != "control"}
        if kw.get("key_bytes"):
            # the keys stay under half the job's key memory (below)
            kw["key_bytes"] = 2 * _int_arg("key_bytes", kw["key_bytes"])
        if "timeout_ms" not in kw:
            kw["timeout_ms"] = max(1000, min(int(timeout.total_seconds() * 1000), 2 ** 31 - 1))
        global _host_level_taken
        if "local_world" not in kw:
            # host-local aggregation (torchrun's LOCAL_WORLD_SIZE, read by
            # libpbox) for the default group only, the process's first over
            # the whole world: a subgroup's ranks are not hosts of
            # consecutive ranks, and each host-level job costs the box
            # LOCAL_WORLD_SIZE lane jobs more (--max-jobs)
            if (_host_level_taken or size != _env.integer("WORLD_SIZE") or
                    rank != _env.integer("RANK")):
                kw["local_world"] = 1
            _host_level_taken = True
        self.client = Client(_options.get("control"), job, rank, size, join_secret=secret, **kw)
        self.job = job
        self._keys = {}          # (signature, lane) -> key
        self._owner = {}         # key -> the (signature, lane) slots using it
        self._seq = {}           # signature -> calls so far
        self._busy = {}          # key -> threading.Event set when its call ended
        self._lru = collections.OrderedDict()  # key -> its box bytes, least recent first
        st = self.client.stats()
        self._seg = max(int(st.get("seg_bytes", 0)), 64)
        # live keys stay under half the job's key memory: a key's block
        # is contiguous, and the free half leaves room for new shapes
        # between the blocks of older ones (first fit); set_options'
        # key_bytes asked for twice what it names (above)
        self._budget = int(st.get("key_bytes", 0)) // 2 or None
        self._held = 0
        self.released = 0        # keys given back to make room
        self._failed = None      # the first failed call's message (fail-stop)
        self._q = queue.SimpleQueue()
        # the waiter thread and the finalizer hold the queue, the client
        # and a weak reference, never the group: a group nobody holds any
        # more (dist.destroy_process_group()) is shut down by the garbage
        # collector, a live one at exit, before the interpreter tears down
        # (a thread left inside torch at finalization can abort the process)
        self._thread = threading.Thread(target=_waiter, args=(self._q, weakref.ref(self)),
                                        name="pbox-pg-waiter", daemon=True)
        self._thread.start()
        self._finalizer = weakref.finalize(self, _shutdown, self._q, self._thread,
                                           self.client)
        self.calls = {"box": 0, "gloo": 0}

    def getBackendName(self):
        return "pbox"

    def __repr__(self):
        return f"ProcessGroupPBox(job={self.job!r}, rank={self.rank()}, size={self.size()})"

    # -- keys and completion ------------------------------------------------
    def _box_bytes(self, sig):
        """Box memory of a key of signature sig: whole segments of every
        slice (allgather and reduce_scatter keys have world slices)."""
        if sig[0] == "barrier":
            return self._seg
        slices = self.size() if sig[0] in ("allgather", "reduce_scatter") else 1
        nbytes = sig[1] * torch.empty((), dtype=sig[2]).element_size()
        return slices * -(-nbytes // self._seg) * self._seg

    def _make_room(self, need):
        """Release least recently used keys until need more bytes fit the
        budget (the same keys on every rank: the same calls came first)."""
        drop = []
        while self._budget and self._lru and self._held + need > self._budget:
            k, nb = self._lru.popitem(last=False)
            ev = self._busy.pop(k, None)
            if ev is not None:
                ev.wait()                    # its last call has ended
            for slot in self._owner.pop(k):
                del self._keys[slot]
            self._held -= nb
            drop.append(k)
        for i in range(0, len(drop), 1024):
            self.client.release(drop[i:i + 1024])
        self.released += len(drop)

    def _shared_lane(self, sig, need):
        """A key of another lane of signature sig for a lane that has none,
        when a new key of need bytes would pass the budget: the least
        recently used one (lanes are for calls of one shape in flight at
        once; a new lane is not worth releasing keys, which a training
        loop would do every iteration). None: make a new key."""
        if not self._budget or self._held + need <= self._budget:
            return None
        mine = {self._keys.get((sig, lane)) for lane in range(LANES)} - {None}
        for k in self._lru:
            if k in mine:
                return k
        return None

    def _key(self, sig):
        """The key of the next call of signature sig (the same on every
        rank), once the last call that used it has ended."""
        seq = self._seq.get(sig, 0)
        self._seq[sig] = seq + 1
        slot = (sig, seq % LANES)
        k = self._keys.get(slot)
        if k is None:
            nb = self._box_bytes(sig)
            k = self._shared_lane(sig, nb)
            if k is not None:
                self._owner[k].append(slot)
                self._keys[slot] = k
        if k is None:
            self._make_room(nb)
            h = hashlib.blake2b(repr(slot).encode(), digest_size=8)
            k = int.from_bytes(h.digest(), "little") & _KEY_MASK
            while k in self._owner:          # a collision: the next free key
                k = (k + 1) & _KEY_MASK
            self._owner[k] = [slot]
            self._keys[slot] = k
            self._lru[k] = nb
            self._held += nb
        self._lru.move_to_end(k)
        ev = self._busy.get(k)
        if ev is not None:
            ev.wait()
        return k

    def _fail(self, e, outs, stream=None):
        """A collective failed. torch 1.13's Work.wait() cannot raise (it
        returns True whatever its future holds), so a synchronous
        dist.all_reduce would go on with an unreduced tensor: the call's
        outputs become NaN (on the call's stream), the error goes to
        stderr, and every later call on this group raises it (fail-stop).
        Futures (DDP) raise at once. Never raises itself."""
        if self._failed is None:
            self._failed = f"rank {self.rank()}: a pbox collective failed: {e}"
            print(f"pbox backend: {self._failed}", file=sys.stderr, flush=True)
        _poison(outs, stream, f"rank {self.rank()}")

    def _check_failed(self):
        """Raise the group's first failure, if there was one."""
        if self._failed is not None:
            raise Error(EABORTED, f"{self._failed} (the group stops at its first error)")

    def _box(self, name, sig, start, finish, outs=(), stream=None, work=_work):
        """Run start(key) -> pbox Requests now, then finish() on the waiter
        thread once they are done; return the Work. outs: the tensors the
        call writes (NaN if it fails). stream: a CUDA call's stream (its
        Work is a CUDA-aware future completed there)."""
        self._check_failed()
        fut = (torch.futures.Future() if stream is None
               else torch.futures.Future(devices=[stream.device]))
        out = fut.then(_unwrap)   # a failure becomes a real error for C++ callers
        with torch.autograd.profiler.record_function(f"pbox::{name}") as rf:
            key = self._key(sig)
            reqs = start(key)
            ev = threading.Event()
            self._busy[key] = ev
            out = rf._call_end_callbacks_on_future(out)
        self.calls["box"] += 1
        self._q.put((reqs, finish, fut, ev, list(outs), stream))
        return work(out)

    def _cuda_sum(self, name, t, buf, op, finish, outs):
        """allreduce/reduce of CUDA tensor t through buf (t or a contiguous
        copy): the sum, scaled for AVG, lands in buf on t's current stream;
        finish() then runs there. outs: as for _box. A missing GPU library
        or device fails the call as any other failure does (_fail: NaN
        outputs, stderr, the group stops) and its Work holds the reason."""
        self._check_failed()
        try:
            self.client.gpu_init()       # names a missing GPU library or device
            stream = _cuda_stream(t)
        except Error as e:
            self._fail(e, outs)
            fut = torch.futures.Future()
            out = fut.then(_unwrap)
            fut.set_exception(e)
            return _work(out)
        scale = 1.0 / self.size() if op == "avg" else 1.0
        return self._box(name, ("allreduce", t.numel(), t.dtype, "cuda"),
                         lambda k: [self.client.iallreduce_cuda(buf, k, scale=scale,
                                                                stream=stream)],
                         finish, outs, stream)

    def _gloo_call(self, name, *args):
        self._check_failed()
        self.calls["gloo"] += 1
        return self._gloo_raw(name, *args)

    def _gloo_raw(self, name, *args):
        """The inner Gloo group's collective name(*args), which torch 1.13's
        Gloo has no bfloat16 type for ("Invalid scalar type"): its
        reductions run on float32 copies of bfloat16 tensors, rounded back
        once when done (MAX and MIN exact), and the others move bfloat16
        tensors' bytes as float16 (Gloo copies them; it has no int16)."""
        call = getattr(self._gloo, name)
        if not any(t.dtype == torch.bfloat16 for t in _tensors(args)):
            return call(*args)
        if name not in _GLOO_REDUCING:
            return call(*_map_tensors(args, lambda t: t.view(torch.float16)
                                      if t.dtype == torch.bfloat16 else t))
        pairs = []

        def wide(t):
            if t.dtype != torch.bfloat16:
                return t
            pairs.append((t, t.float()))
            return pairs[-1][1]

        work = call(*_map_tensors(args, wide))

        def narrow(fut):
            fut.value()                  # raises what Gloo raised
            for t, w in pairs:
                t.copy_(w)
            return [t for t, _ in pairs]

        return _work(work.get_future().then(narrow))

    def _gloo_composed(self, run):
        """A collective torch 1.13's Gloo lacks (reduce_scatter, its tensor
        form, all_gather_into_tensor, list all_to_all), made of ones it has:
        run() makes the Gloo calls, waits for them and writes the outputs
        (so the call blocks); its Work is complete."""
        self._check_failed()
        self.calls["gloo"] += 1
        return _complete(run())

    def _empty(self, result):
        """The Work of a call with nothing to move (every tensor empty),
        complete at once: torch 1.13's Gloo divides by zero (SIGFPE) on an
        empty allgather."""
        self._check_failed()
        return _complete(result)

    def _gloo_avg(self, name, tensors, opts, root=None):
        """all_reduce (root None) or reduce with AVG on Gloo, which lacks
        it: the SUM, then divided by the world in the tensors' dtype (as
        on the box) once it is done; floating-point tensors only."""
        for t in tensors:
            _check_avg(name, t.dtype)
        o = AllreduceOptions() if root is None else ReduceOptions()
        o.reduceOp = ReduceOp.SUM
        o.timeout = opts.timeout
        if root is not None:
            o.rootRank, o.rootTensor = opts.rootRank, opts.rootTensor
        work = self._gloo_call("allreduce" if root is None else "reduce", tensors, o)
        world = self.size()
        mine = root is None or root == self.rank()

        def divide(fut):
            fut.value()                  # raises what Gloo raised
            if mine:
                for t in tensors:
                    t.div_(world)
            return tensors

        return _work(work.get_future().then(divide))

    def _gloo_reduce_scatter(self, out, ins, op):
        """out = this rank's part of the reduction (op) of ins, on Gloo:
        an allreduce of them all, then a copy of the part. AVG, which Gloo
        lacks, is the SUM divided by the world in the tensor's dtype (as
        on the box), for floating-point tensors only (an integer AVG is
        refused, as Gloo refuses it for all_reduce)."""
        if out.numel() != ins[self.rank()].numel():
            raise ValueError(f"reduce_scatter: the output has {out.numel()} elements, this "
                             f"rank's input part {ins[self.rank()].numel()}")
        flat = torch.cat([i.reshape(-1) for i in ins])
        avg = op == ReduceOp.AVG
        if avg:
            _check_avg("reduce_scatter", flat.dtype)
        o = AllreduceOptions()
        o.reduceOp = ReduceOp.SUM if avg else op
        self._gloo_raw("allreduce", [flat], o).wait()
        start = sum(i.numel() for i in ins[:self.rank()])
        part = flat[start:start + out.numel()]
        if avg:
            part.div_(self.size())
        out.copy_(part.view_as(out))

    # -- collectives on the box -----------------------------------------------
    def allreduce(self, tensors, opts=None):
        _check_outputs("all_reduce", tensors)
        opts = opts if opts is not None else AllreduceOptions()
        op = _box_op(opts)
        if len(tensors) != 1 or op is None or not _boxable(tensors[0], cuda=True):
            if op == "avg":
                return self._gloo_avg("all_reduce", tensors, opts)
            return self._gloo_call("allreduce", tensors, opts)
        t = tensors[0]
        buf = t if t.is_contiguous() else t.contiguous()
        world = self.size()
        if t.device.type == "cuda":
            def finish_cuda():
                if buf is not t:
                    t.copy_(buf)
                return tensors
            return self._cuda_sum("allreduce", t, buf, op, finish_cuda, [t])

        def finish():
            if op == "avg":
                buf.div_(world)
            if buf is not t:
                t.copy_(buf)
            return tensors

        return self._box("allreduce", ("allreduce", t.numel(), t.dtype),
                         lambda k: [self.client.iallreduce(buf, k)], finish, [t])

    def reduce(self, tensors, opts):
        # every rank refuses what the root would (the same call everywhere)
        _check_outputs("reduce", tensors)
        op = _box_op(opts)
        if (len(tensors) != 1 or op is None or not _boxable(tensors[0], cuda=True) or
                opts.rootTensor):
            if op == "avg":
                return self._gloo_avg("reduce", tensors, opts, root=opts.rootRank)
            return self._gloo_call("reduce", tensors, opts)
        t = tensors[0]
        root = opts.rootRank == self.rank()
        buf = t if root and t.is_contiguous() else t.contiguous().clone()
        world = self.size()
        if t.device.type == "cuda":
            def finish_cuda():   # only the root's tensor changes
                if root and buf is not t:
                    t.copy_(buf)
                return tensors
            return self._cuda_sum("reduce", t, buf, op, finish_cuda, [t] if root else [])

        def finish():   # only the root's tensor changes
            if root:
                if op == "avg":
                    buf.div_(world)
                if buf is not t:
                    t.copy_(buf)
            return tensors

        return self._box("reduce", ("allreduce", t.numel(), t.dtype),
                         lambda k: [self.client.iallreduce(buf, k)], finish,
                         [t] if root else [])

    def broadcast(self, tensors, opts):
        _check_outputs("broadcast", tensors)
        if len(tensors) != 1 or opts.rootTensor or not _boxable(tensors[0]):
            return self._gloo_call("broadcast", tensors, opts)
        t = tensors[0]
        root = opts.rootRank
        buf = t if t.is_contiguous() else t.contiguous()

        def finish():
            if buf is not t:
                t.copy_(buf)
            return tensors

        return self._box("broadcast", ("broadcast", t.numel(), t.dtype, root),
                         lambda k: [self.client.ibroadcast(buf, k, root)], finish, [t])

    def _allgather_flat(self, name, out, inp, finish, outs):
        """Gather inp from every rank into the flat out (world * n)."""
        src = inp if inp.is_contiguous() else inp.contiguous()
        return self._box(name, ("allgather", src.numel(), src.dtype),
                         lambda k: [self.client.iallgather(src, out, k)], finish, outs)

    def allgather(self, output_tensors, input_tensors, opts=None):
        _check_outputs("all_gather", output_tensors)
        outs = output_tensors[0] if len(output_tensors) == 1 else None
        inp = input_tensors[0] if len(input_tensors) == 1 else None
        if (outs is not None and inp is not None and inp.numel() == 0 and
                len(outs) == self.size() and all(_empty_like(o, inp) for o in outs)):
            return self._empty(output_tensors)
        if (outs is None or inp is None or not _boxable(inp) or len(outs) != self.size() or
                any(o.dtype != inp.dtype or o.numel() != inp.numel() for o in outs)):
            return self._gloo_call("allgather", output_tensors, input_tensors, *(
                [opts] if opts is not None else []))
        flat = torch.empty(self.size() * inp.numel(), dtype=inp.dtype)

        def finish():
            for i, o in enumerate(outs):
                o.copy_(flat[i * inp.numel():(i + 1) * inp.numel()].view_as(o))
            return output_tensors

        return self._allgather_flat("allgather", flat, inp, finish, list(outs))

    def _allgather_base(self, output, input, opts=None):
        _check_outputs("all_gather_into_tensor", output)
        if input.numel() == 0 and _empty_like(output, input):
            return self._empty([output])
        # the path depends only on what every rank's call has in common
        # (dtypes, sizes), never on this rank's layout: a non-contiguous
        # output is staged below, as the other collectives' are
        if (not _boxable(input) or not _boxable(output) or output.dtype != input.dtype or
                output.numel() != self.size() * input.numel()):
            if output.numel() != self.size() * input.numel():
                return self._gloo_call("_allgather_base", output, input, *(
                    [opts] if opts is not None else []))

            def run():   # Gloo's allgather into parts, then one copy
                parts = [torch.empty_like(input, memory_format=torch.contiguous_format)
                         for _ in range(self.size())]
                self._gloo_raw("allgather", [parts], [input.contiguous()]).wait()
                output.copy_(torch.cat([p.reshape(-1) for p in parts]).view_as(output))
                return [output]
            return self._gloo_composed(run)
        res = _contiguous_out(output)

        def finish():
            if res is not output:
                output.copy_(res)
            return [output]

        return self._allgather_flat("all_gather_into_tensor", res.view(-1), input, finish,
                                    [output])

    def _reduce_scatter_flat(self, name, out, inp, op, finish, outs):
        world = self.size()

        def done():
            if op == "avg":
                out.div_(world)
            return finish()

        return self._box(name, ("reduce_scatter", out.numel(), out.dtype),
                         lambda k: [self.client.ireduce_scatter(inp, out, k)], done, outs)

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        _check_outputs("reduce_scatter", output_tensors)
        op = _box_op(opts)
        out = output_tensors[0] if len(output_tensors) == 1 else None
        ins = input_tensors[0] if len(input_tensors) == 1 else None
        if (op is None or out is None or ins is None or not _boxable(out) or
                len(ins) != self.size() or
                any(i.dtype != out.dtype or i.numel() != out.numel() for i in ins)):
            if out is None or ins is None or len(ins) != self.size():
                return self._gloo_call("reduce_scatter", output_tensors, input_tensors, opts)

            def run():
                self._gloo_reduce_scatter(out, ins, opts.reduceOp)
                return output_tensors
            return self._gloo_composed(run)
        flat = torch.cat([i.reshape(-1) for i in ins])
        res = _contiguous_out(out)

        def finish():
            if res is not out:
                out.copy_(res)
            return output_tensors

        return self._reduce_scatter_flat("reduce_scatter", res.view(-1), flat, op, finish,
                                         [out])

    def _reduce_scatter_base(self, output, input, opts):
        _check_outputs("reduce_scatter_tensor", output)
        op = _box_op(opts)
        # as in _allgather_base: a non-contiguous output is staged, so that
        # every rank takes the same path
        if (op is None or not _boxable(output) or not _boxable(input) or
                input.dtype != output.dtype or input.numel() != self.size() * output.numel()):
            if input.numel() != self.size() * output.numel():
                return self._gloo_call("_reduce_scatter_base", output, input, opts)

            def run_base():
                self._gloo_reduce_scatter(output, input.reshape(-1).chunk(self.size()),
                                          opts.reduceOp)
                return [output]
            return self._gloo_composed(run_base)
        inp = input if input.is_contiguous() else input.contiguous()
        res = _contiguous_out(output)

        def finish():
            if res is not output:
                output.copy_(res)
            return [output]

        return self._reduce_scatter_flat("reduce_scatter_tensor", res.view(-1), inp.view(-1),
                                         op, finish, [output])

    def barrier(self, opts=None):
        one = torch.ones(1)
        return self._box("barrier", ("barrier",),
                         lambda k: [self.client.iallreduce(one, k)], lambda: [one],
                         work=_FutureWork)

    # -- the rest: Gloo ---------------------------------------------------------
    def allreduce_coalesced(self, tensors, opts=None):
        _check_outputs("all_reduce_coalesced", tensors)
        return self._gloo_call("allreduce_coalesced", tensors, *([opts] if opts else []))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        _check_outputs("all_gather_coalesced", output_lists)
        return self._gloo_call("allgather_coalesced", output_lists, input_list,
                               *([opts] if opts else []))

    def gather(self, output_tensors, input_tensors, opts):
        _check_outputs("gather", output_tensors)
        return self._gloo_call("gather", output_tensors, input_tensors, opts)

    def scatter(self, output_tensors, input_tensors, opts):
        _check_outputs("scatter", output_tensors)
        return self._gloo_call("scatter", output_tensors, input_tensors, opts)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        _check_outputs("all_to_all", output_tensors)
        if (len(output_tensors) != self.size() or len(input_tensors) != self.size() or
                len({t.dtype for t in output_tensors + input_tensors}) != 1):
            return self._gloo_call("alltoall", output_tensors, input_tensors,
                                   *([opts] if opts else []))

        def run():   # Gloo's alltoall_base over the flattened lists
            inp = torch.cat([t.reshape(-1) for t in input_tensors])
            out = torch.empty(sum(t.numel() for t in output_tensors), dtype=inp.dtype)
            self._gloo_raw("alltoall_base", out, inp, [t.numel() for t in output_tensors],
                           [t.numel() for t in input_tensors]).wait()
            start = 0
            for t in output_tensors:
                t.copy_(out[start:start + t.numel()].view_as(t))
                start += t.numel()
            return output_tensors
        return self._gloo_composed(run)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        _check_outputs("all_to_all_single", output)
        return self._gloo_call("alltoall_base", output, input, output_split_sizes,
                               input_split_sizes, *([opts] if opts else []))

    def send(self, tensors, dst, tag=0):
        return self._gloo_call("send", tensors, dst, tag)

    def recv(self, tensors, src, tag=0):
        _check_outputs("recv", tensors)
        return self._gloo_call("recv", tensors, src, tag)

    def recv_anysource(self, tensors, tag=0):
        _check_outputs("recv", tensors)
        return self._gloo_call("recv_anysource", tensors, tag)

    def monitored_barrier(self, *args, **kw):
        return self._gloo.monitored_barrier(*args, **kw)

    def shutdown(self):
        """End the waiter thread after the calls queued so far, then close
        the box client (the job is left). Runs by itself when the group is
        garbage or at exit; a second call does nothing."""
        self._thread = None
        self._finalizer()


def _waiter(q, ref):
    """A group's waiter thread: finish each call of the queue q once its
    requests are done, until None. ref: a weak reference to the group
    (for _fail), so that the thread does not keep it alive."""
    while True:
        item = q.get()
        if item is None:
            return
        reqs, finish, fut, ev, outs, stream = item
        try:
            # no autograd here: the outputs may be leaves that require
            # grad (dist.all_reduce(param)), written in place
            with torch.no_grad():
                for r in reqs:
                    r.wait()
                with _on_stream(stream):   # CUDA: finish and complete on its stream
                    res = finish()
                    ev.set()
                    fut.set_result(res)
        except BaseException as e:  # hand every failure to the caller's future
            ev.set()
            pg = ref()
            if pg is not None:
                pg._fail(e, outs, stream)
            else:                   # the group is gone: its calls still fail visibly
                print(f"pbox backend: a pbox collective failed: {e}", file=sys.stderr,
                      flush=True)
                _poison(outs, stream, "a destroyed group")
            del pg
            if not fut.done():
                fut.set_exception(e if isinstance(e, Exception) else RuntimeError(str(e)))


def _poison(outs, stream, who):
    """A failed call's floating-point outputs become NaN (on its stream);
    never raises."""
    try:
        with torch.no_grad(), _on_stream(stream):
            for t in outs:
                if t.is_floating_point():
                    t.fill_(float("nan"))
    except Exception as f:   # the error stands; say why the NaNs are not there
        print(f"pbox backend: {who}: could not set the failed call's outputs to NaN: {f}",
              file=sys.stderr, flush=True)


def _shutdown(q, thread, client):
    """ProcessGroupPBox.shutdown, holding no reference to the group: end
    the waiter thread after the calls queued so far, close the client."""
    q.put(None)
    if thread is not threading.current_thread():   # the group died on its own thread
        thread.join()
    client.close()


def _create(store, rank, size, timeout):
    return ProcessGroupPBox(store, rank, size, timeout)


if "PBOX" not in dist.Backend._plugins:     # importing twice registers once
    dist.Backend.register_backend("pbox", _create)
