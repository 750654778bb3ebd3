# SPDX-License-Identifier: BSD-3-Clause
"""pbox._sparse - what makes top-k gradients train like dense ones, on the
worker, for TopkState's CPU float32 buckets (pbox/torch.py): momentum
correction and momentum factor masking (Lin et al., Deep Gradient
Compression), Nesterov, local gradient clipping, the density schedule
(warm-up), layer-aware selection (small tensors dense, every layer its
share) and the residuals' state_dict. The selection is libpbox's pbox_topk
(MSTopK); the chosen entries go out with pbox_iallreduce_sparse, so the
box sees the same sparse records as pbox_allreduce_topk's.

The rule per bucket and step (u: momentum, v: residual, both per entry):
    g = clip(g) + weight_decay * p
    momentum m > 0:  u = m u + g;  v += u  (Nesterov: v += g + m u)
    TopkAdam:        Adam's moments of g on the worker, v += their step
                     direction (bias-corrected m / (sqrt(s) + eps))
    else:            v += g
    send the top density(step) of v per layer (all of a small tensor's;
    select="bucket": of the bucket's sparse tensors together, at least
    min_entries),
    zero v where sent and, with masking, u there too (sparse layers only).
Without error feedback v is dropped after each step.

The small tensors sent whole ("whole": dense_below) go as entries of the
sparse call (8 bytes each: index and value), or, with prepare(split=True)
(TopkState's default, whole="dense"), apart as the values alone, which
topk_hook sums with a dense allreduce of their own (4 bytes each)."""
import ctypes
import math
import warnings

import numpy as np
import torch

from . import _lib

# Defaults, chosen on bench/sparse_quality (docs/performance.md "Sparse
# gradients: training quality"); see TopkState.
DENSE_BELOW = 1024          # tensors under this many elements go dense
WARMUP_STEPS = 100          # steps of the warm-up (0: none)
WARMUP_START = 0.25         # density at step 0 of the warm-up
SELECT = "bucket"           # one selection per bucket ...
MAX_IDLE = 20               # ... but a tensor idle this many steps gets its share
MIN_ENTRIES = 1024          # ... and a bucket's selection takes at least this many
                            # (min_entries None: unless momentum factor masking is on)


def topk_select(x, k):
    """(indices int64, values float32) of about k of the entries of the
    contiguous float32 CPU tensor x with the largest magnitudes
    (pbox_topk: between k - k/8 and k + k/8, indices increasing)."""
    n = x.numel()
    k = max(1, min(int(k), n))
    if k >= n:
        return torch.arange(n, dtype=torch.int64), x.clone()
    cap = k + k // 8 + 1
    idx = np.empty(cap, dtype=np.uint32)
    val = np.empty(cap, dtype=np.float32)
    m = ctypes.c_size_t()
    rc = _lib.load().pbox_topk(x.data_ptr(), n, k, idx.ctypes.data, val.ctypes.data,
                               ctypes.byref(m))
    if rc < 0:
        raise RuntimeError(f"pbox_topk failed ({rc})")
    m = m.value
    return torch.from_numpy(idx[:m].astype(np.int64)), torch.from_numpy(val[:m])


class Schedule:
    """Density per step: points [(step, density), ...] with increasing
    steps, exponential (geometric) between them, the last density from
    the last step on. The last density must be the target."""

    def __init__(self, target, points):
        pts = [(int(s), float(d)) for s, d in points]
        if not pts:
            pts = [(0, target)]
        for i, (s, d) in enumerate(pts):
            if not 0 < d <= 1:
                raise ValueError(f"schedule: density {d} at step {s} is outside (0, 1]")
            if s < 0 or (i and s <= pts[i - 1][0]):
                raise ValueError("schedule: steps must be >= 0 and increasing, got "
                                 f"{[p[0] for p in pts]}")
        if pts[-1][1] != target:
            raise ValueError(f"schedule ends at density {pts[-1][1]}, not at the target "
                             f"density {target}")
        self.points = pts

    def __call__(self, step):
        pts = self.points
        if step <= pts[0][0]:
            return pts[0][1]
        for (s0, d0), (s1, d1) in zip(pts, pts[1:]):
            if step < s1:
                return d0 * (d1 / d0) ** ((step - s0) / (s1 - s0))
        return pts[-1][1]


def warmup_schedule(target, steps, start=WARMUP_START):
    """DGC's warm-up: density falls exponentially from `start` at step 0
    to `target` at step `steps` (0 steps: the target from the start)."""
    steps = int(steps)
    if steps <= 0 or start <= target:
        return Schedule(target, [(0, target)])
    return Schedule(target, [(0, start), (steps, target)])


class _Record:
    """One bucket: its parameters, their offsets, the flat residual v and
    momentum u (views of which are each parameter's state)."""

    __slots__ = ("params", "offsets", "numel", "v", "u", "w", "perm", "whole")

    def __init__(self, params, numel, momentum, adam=False):
        self.params = list(params)
        self.offsets = []
        n = 0
        for p in self.params:
            self.offsets.append(n)
            n += p.numel()
        if n != numel:
            raise RuntimeError(f"DDP bucket of {numel} elements holds parameters of {n}")
        self.numel = n
        self.v = torch.zeros(n)
        self.u = torch.zeros(n) if momentum or adam else None
        self.w = torch.zeros(n) if adam else None   # Adam's exp_avg_sq
        self.perm = None       # bucket positions in canonical order (Engine._canon)
        self.whole = None      # positions of the tensors sent whole (Engine._whole)

    def views(self, i):
        off, p = self.offsets[i], self.params[i]
        sl = slice(off, off + p.numel())
        return tuple(None if t is None else t[sl] for t in (self.v, self.u, self.w))


class Engine:
    """The per-State worker side of sparse training (module docstring)."""

    def __init__(self, density, error_feedback, momentum, nesterov, masking, clip, schedule,
                 dense_below, select, max_idle):
        self.density = density
        self.error_feedback = error_feedback
        self.momentum = momentum
        self.nesterov = nesterov
        self.masking = masking
        self.clip = clip
        self.schedule = schedule
        self.dense_below = dense_below
        self.select = select
        self.max_idle = max_idle
        self.min_entries = 0        # a bucket's selection takes at least this many;
                                    # None: floor() (TopkState's default)
        self.adam = None            # (beta1, beta2, eps): TopkAdam's moments on the worker
        self.step = 0               # completed steps (a bucket said is_last)
        self.idle = {}              # id(param) -> steps since it last sent an entry
        self.weight_decay = {}      # id(param) -> weight decay (TopkSGD)
        self.params = None          # the optimizer's parameters, in order (state_dict)
        self._recs = {}             # key -> _Record
        self._pviews = {}           # id(param) -> (v view, u view): its state now
        self._pending = {}          # id(param) -> (residual, momentum) loaded, not yet placed
        # measurements
        self.sent = 0               # entries sent
        self.sent_whole = 0         # values sent apart (prepare(split=True))
        self.starved = 0            # (sparse parameter, step) pairs that sent nothing
        self.longest_idle = 0
        self.forced = 0             # parameters given entries by the starvation guard
        self.seconds = 0.0          # time in prepare()

    def density_at(self, step=None):
        return self.schedule(self.step if step is None else step)

    def forget(self, key):
        self._recs.pop(key, None)

    def _record(self, key, bucket):
        rec = self._recs.get(key)
        params = bucket.parameters()
        if rec is not None and len(rec.params) == len(params) and \
                all(a is b for a, b in zip(rec.params, params)):
            return rec
        # a new bucket, or a rebuilt one under the same key (same index and
        # size, other parameters or order): its parameters' state moves in
        rec = _Record(params, bucket.buffer().numel(), self.momentum, self.adam is not None)
        for i, p in enumerate(rec.params):
            new = rec.views(i)
            old = self._pviews.get(id(p)) or self._pending.pop(id(p), None)
            if old is not None:   # a rebuilt bucket, or a loaded state_dict
                for dst, src in zip(new, old):
                    if dst is not None and src is not None:
                        dst.copy_(src.reshape(-1))
            self._pviews[id(p)] = new
        self._canon(rec)
        self._recs[key] = rec
        return rec

    def _canon(self, rec):
        """The selection over a bucket must not depend on the order DDP put
        its parameters in (the first iteration's layout differs from the
        rebuilt one, and a resumed run starts with the first): with the
        parameters' order known (self.params), rec.perm lists the bucket's
        positions parameter by parameter in that order."""
        if self.params is None or len(rec.params) < 2:
            return
        pos = {id(p): i for i, p in enumerate(self.params)}
        order = sorted(range(len(rec.params)), key=lambda i: pos.get(id(rec.params[i]), -1))
        if order == list(range(len(rec.params))):
            return
        rec.perm = torch.cat([torch.arange(rec.offsets[i], rec.offsets[i] +
                                           rec.params[i].numel(), dtype=torch.int64)
                              for i in order])

    def _whole(self, rec):
        """The bucket positions of its tensors under dense_below (sent
        whole), increasing: an int64 tensor, or None if it has none."""
        if rec.whole is None:
            parts = [torch.arange(o, o + p.numel(), dtype=torch.int64)
                     for o, p in zip(rec.offsets, rec.params) if p.numel() < self.dense_below]
            rec.whole = torch.cat(parts) if parts else torch.empty(0, dtype=torch.int64)
        return rec.whole if rec.whole.numel() else None

    @torch.no_grad()
    def prepare(self, key, bucket, g, world, split=False, ranks=1):
        """Fold the bucket's gradient g (its flat buffer) into the state
        and take this step's entries out: (indices int64 increasing,
        values float32). split=True (below density 1): the tensors sent
        whole are not among the entries but apart: (indices, values,
        whole positions int64 increasing or None, their values). g may be
        the sum of `ranks` ranks' gradients (a host's): weight decay is
        then added that many times, as each rank would; world is the
        number of such contributions (clipping's)."""
        rec = self._record(key, bucket)
        if self.clip is not None:
            lim = self.clip / math.sqrt(world)
            nrm = float(g.norm())
            if nrm > lim:
                g.mul_(lim / nrm)
        if self.weight_decay:
            for p, off in zip(rec.params, rec.offsets):
                wd = self.weight_decay.get(id(p), 0.0)
                if wd:
                    g[off:off + p.numel()].add_(p.detach().reshape(-1), alpha=wd * ranks)
        v, u, m = rec.v, rec.u, self.momentum
        if self.adam is not None:
            # Adam on the worker's own gradient; its step direction is what
            # is accumulated and selected (TopkAdam)
            b1, b2, eps = self.adam
            t = self.step + 1
            u.mul_(b1).add_(g, alpha=1 - b1)
            rec.w.mul_(b2).addcmul_(g, g, value=1 - b2)
            den = (rec.w / (1 - b2 ** t)).sqrt_().add_(eps)
            v.addcdiv_(u, den, value=1 / (1 - b1 ** t))
        elif u is not None:
            u.mul_(m).add_(g)
            if self.nesterov:
                v.add_(g).add_(u, alpha=m)
            else:
                v.add_(u)
        else:
            v.add_(g)
        d = self.density_at()
        whole = self._whole(rec) if split and d < 1 else None
        parts, masked = [], []
        if d >= 1:
            parts.append(torch.arange(rec.numel, dtype=torch.int64))
        elif self.select == "layer":
            for i, p in enumerate(rec.params):
                off, n = rec.offsets[i], p.numel()
                if n < self.dense_below:
                    if whole is None:
                        parts.append(torch.arange(off, off + n, dtype=torch.int64))
                    continue
                idx, _ = topk_select(v[off:off + n], math.ceil(d * n))
                parts.append(idx + off)
                masked.append(parts[-1])
        else:
            parts, masked = self._select_bucket(rec, v, d, whole is None)
        if not parts:
            idx = torch.empty(0, dtype=torch.int64)
        else:
            idx = torch.cat(parts) if len(parts) > 1 else parts[0]
        if self.select != "layer" and d < 1:
            idx, _ = torch.sort(idx)
        val = v[idx]
        wval = None if whole is None else v[whole]
        if self.error_feedback:
            v[idx] = 0
            if whole is not None:
                v[whole] = 0
        else:
            v.zero_()
        if u is not None and self.masking and masked and self.adam is None:
            sent = torch.cat(masked)
            u[sent] = 0
        self.sent += idx.numel()
        if not split:
            return idx, val
        self.sent_whole += 0 if whole is None else whole.numel()
        return idx, val, whole, wval

    @torch.no_grad()
    def follow(self, key, bucket, split=False):
        """prepare()'s answer for a rank whose host's local rank 0 selects
        from the host's sum (TopkState(host=True)): no entries, and with
        split the same positions sent whole, as zeros (the host's values
        come from local rank 0)."""
        rec = self._record(key, bucket)
        idx, val = torch.empty(0, dtype=torch.int64), torch.empty(0)
        if not split:
            return idx, val
        whole = self._whole(rec) if self.density_at() < 1 else None
        return idx, val, whole, None if whole is None else torch.zeros(whole.numel())

    def floor(self):
        """The selection's floor: min_entries, or with None MIN_ENTRIES
        unless momentum factor masking is on (momentum > 0 and masking):
        there each entry sent beyond the density clears its momentum, and
        the suite's momentum-SGD tasks train worse with a floor (the CNN
        1.034 of dense against 1.023 at 1%), where the others (Adam's
        moments are not masked) need it (the transformer 1.022 against
        1.170): docs/performance.md."""
        if self.min_entries is not None:
            return self.min_entries
        return 0 if self.momentum > 0 and self.masking else MIN_ENTRIES

    def _select_bucket(self, rec, v, d, with_whole=True):
        """One selection over the whole bucket (small tensors are sent whole
        besides, among the parts if with_whole); a tensor that sent nothing
        for max_idle steps gets its own share. Returns (index parts, the
        parts to mask)."""
        parts, sparse = [], []
        for i, p in enumerate(rec.params):
            if p.numel() < self.dense_below:
                if with_whole:
                    parts.append(torch.arange(rec.offsets[i], rec.offsets[i] + p.numel(),
                                              dtype=torch.int64))
            else:
                sparse.append(i)
        if not sparse:
            return parts, []
        nsparse = sum(rec.params[i].numel() for i in sparse)
        k = max(math.ceil(d * nsparse), min(self.floor(), nsparse))
        if rec.perm is None:
            sel, _ = topk_select(v, k)
        else:   # select in the parameters' canonical order, map back
            sel, _ = topk_select(v[rec.perm], k)
            sel, _ = torch.sort(rec.perm[sel])
        bounds = torch.tensor(rec.offsets[1:], dtype=torch.int64)
        which = torch.bucketize(sel, bounds, right=True)
        is_sparse = torch.zeros(len(rec.params), dtype=torch.bool)
        is_sparse[sparse] = True
        sel = sel[is_sparse[which]]        # the small tensors' entries are in parts
        counts = torch.bincount(which, minlength=len(rec.params)).tolist()
        extra = []
        for i in sparse:
            if counts[i]:
                self.idle[id(rec.params[i])] = 0
                continue
            pid = id(rec.params[i])
            self.idle[pid] = self.idle.get(pid, 0) + 1
            self.starved += 1
            self.longest_idle = max(self.longest_idle, self.idle[pid])
            if self.max_idle is not None and self.idle[pid] >= self.max_idle:
                o, n = rec.offsets[i], rec.params[i].numel()
                e, _ = topk_select(v[o:o + n], math.ceil(d * n))
                extra.append(e + o)
                self.idle[pid] = 0
                self.forced += 1
        out = [sel] + extra
        return parts + out, out

    # -- state ------------------------------------------------------------------
    def state_dict(self):
        if self.params is None:
            raise RuntimeError("TopkState.state_dict() needs the parameters' order: give "
                               "TopkState(model=...) or use pbox.torch.TopkSGD")
        state = {}
        for i, p in enumerate(self.params):
            pv = self._pviews.get(id(p)) or self._pending.get(id(p))
            if pv is None:
                continue
            state[i] = {name: None if t is None else t.detach().clone().view(p.shape)
                        for name, t in zip(("residual", "momentum", "exp_avg_sq"), pv)}
        idle = {i: self.idle[id(p)] for i, p in enumerate(self.params) if self.idle.get(id(p))}
        return {"step": self.step, "density": self.density, "momentum": self.momentum,
                "state": state, "idle": idle}

    def load_state_dict(self, sd):
        if self.params is None:
            raise RuntimeError("TopkState.load_state_dict() needs the parameters' order: give "
                               "TopkState(model=...) or use pbox.torch.TopkSGD")
        self.step = int(sd.get("step", 0))
        self.idle = {id(self.params[int(i)]): int(n) for i, n in sd.get("idle", {}).items()
                     if 0 <= int(i) < len(self.params)}
        state = sd.get("state", {})
        bad = [i for i in state if not (0 <= int(i) < len(self.params)) or
               tuple(state[i]["residual"].shape) != tuple(self.params[int(i)].shape)]
        if bad:
            i = bad[0]
            have = tuple(self.params[int(i)].shape) if 0 <= int(i) < len(self.params) else None
            warnings.warn(f"pbox.torch.TopkState.load_state_dict: the model's shapes changed "
                          f"(parameter {i}: saved {tuple(state[i]['residual'].shape)}, now "
                          f"{have}); the residuals and momentum are dropped", RuntimeWarning,
                          stacklevel=3)
            state = {}
        self._pending = {}
        for p in self.params:   # what is not in the state_dict starts from zero
            for t in self._pviews.get(id(p), ()):
                if t is not None:
                    t.zero_()
        for i, st in state.items():
            p = self.params[int(i)]
            got = tuple(None if st.get(n) is None else st[n].detach().clone()
                        for n in ("residual", "momentum", "exp_avg_sq"))
            pv = self._pviews.get(id(p))
            if pv is None:
                self._pending[id(p)] = got
                continue
            for dst, src in zip(pv, got):
                if dst is not None and src is not None:
                    dst.copy_(src.reshape(-1))
