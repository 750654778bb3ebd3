# SPDX-License-Identifier: BSD-3-Clause
"""DASO over pbox: node-local averaging every step, global averaging through
the box every H steps, H adapted as training goes (Coquelin et al. 2021,
"Accelerating neural network training with distributed asynchronous and
selective optimization"; issue 41, docs/pytorch.md "DASO").

    daso = pbox.torch.DASO(model, optimizer, local_size=2)
    for x, y in data:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        daso.step(loss.item())      # instead of optimizer.step()

Each step:
  1. the gradients are averaged over the ranks of this host (`local_group`,
     a torch.distributed group of `local_size` consecutive ranks, as
     torchrun numbers them; made here when not given) and the optimizer
     steps: the ranks of a host hold the same parameters;
  2. every `period` steps the parameters are summed over all ranks through
     the box (a pbox.Client of the job `name`), one flat buffer per dtype.
     With stale_steps=0 the sum is waited for at once and every rank takes
     the average: all ranks hold the same bits. With stale_steps=S > 0 it
     is waited for S steps later, overlapped with them, and each rank
     takes the average plus its own progress since it sent
     (p_now - p_sent + mean): DASO's stale global update.
The period (the rule, chosen for being simple and monotone in the loss):
  - `warmup_steps` first steps: 1, blocking (the replicas must not drift
    while the loss falls fast);
  - then every `window` steps the mean loss of the window over all ranks
    (a one-element sum through the box, so that every rank chooses the
    same period) is compared with the previous window's: a rise above
    `plateau` (relative) halves the period (the hosts drift apart:
    average more often); otherwise it doubles, up to `max_period` (the
    hosts average every step inside, so between global averages they
    drift slowly, and less as the loss settles).
The steps where the global average lands are counted in `global_syncs`,
and `periods` keeps the period after each window.
"""
import hashlib

import torch
import torch.distributed as dist

from . import Client, _env


def _key(name, dtype):
    h = hashlib.sha256(f"daso:{name}:{dtype}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


class DASO:
    def __init__(self, model, optimizer, client=None, *, local_size=None, local_group=None,
                 name="daso", warmup_steps=20, max_period=16, window=10, plateau=0.02,
                 stale_steps=0):
        if not dist.is_initialized():
            raise RuntimeError("DASO: torch.distributed is not initialized "
                               "(dist.init_process_group first, for the host's group)")
        for n, v, lo in (("warmup_steps", warmup_steps, 0), ("max_period", max_period, 1),
                         ("window", window, 1), ("stale_steps", stale_steps, 0)):
            if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                raise ValueError(f"DASO: {n}={v!r} must be a whole number >= {lo}")
        if not (isinstance(plateau, (int, float)) and 0 < plateau < 1):
            raise ValueError(f"DASO: plateau={plateau!r} must be in (0, 1)")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        if local_size is None:
            local_size = _env.integer("LOCAL_WORLD_SIZE") or 1
        if not isinstance(local_size, int) or local_size < 1 or self.world % local_size:
            raise ValueError(f"DASO: local_size={local_size!r} must divide the world "
                             f"({self.world})")
        self.local_size = local_size
        if local_group is None and local_size > 1:
            # every rank makes every host's group, in host order (torch's rule)
            for h in range(self.world // local_size):
                g = dist.new_group(list(range(h * local_size, (h + 1) * local_size)))
                if h == self.rank // local_size:
                    local_group = g
        self.local_group = local_group
        self.model, self.optimizer = model, optimizer
        self.params = [p for p in model.parameters() if p.requires_grad]
        for p in self.params:
            if p.device.type != "cpu" or p.dtype != torch.float32:
                raise ValueError("DASO: CPU float32 parameters only for now")
        self.name = str(name)
        self._own_client = client is None
        self.client = client if client is not None else Client(
            job=self.name, rank=self.rank, world=self.world)
        self.warmup_steps, self.max_period = warmup_steps, max_period
        self.window, self.plateau, self.stale_steps = window, plateau, stale_steps
        self.period = 1
        self.periods = []
        self.global_syncs = 0
        self.steps = 0
        self._since = 0
        self._losses = []
        self._prev_mean = None
        self._pending = None     # (request, buffer, parameters as sent, step sent)
        self._key = _key(self.name, "f32")
        self._loss_key = _key(self.name, "loss")

    def _flat(self):
        return torch.cat([p.detach().reshape(-1) for p in self.params])

    def _local_average(self):
        if self.local_size == 1:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, group=self.local_group)
        flat /= self.local_size
        off = 0
        for p, g in zip(self.params, grads):
            n = g.numel()
            if p.grad is None:
                p.grad = flat[off:off + n].view_as(p).clone()
            else:
                p.grad.copy_(flat[off:off + n].view_as(p))
            off += n

    @torch.no_grad()
    def _land(self):
        """Take the pending global sum: the mean, plus this rank's progress
        since it sent (none when blocking)."""
        req, buf, sent, _ = self._pending
        self._pending = None
        req.wait()
        buf /= self.world
        now = self._flat()
        new = now - sent + buf
        off = 0
        for p in self.params:
            n = p.numel()
            p.copy_(new[off:off + n].view_as(p))
            off += n
        self.global_syncs += 1

    def _adapt(self, loss):
        # windows are counted from the first step, so the period may
        # change as soon as the warm-up ends
        if loss is None:
            return
        self._losses.append(float(loss))
        if len(self._losses) < self.window:
            return
        # every rank must choose the same period: the window's mean loss
        # over all ranks, through the box
        t = torch.tensor([sum(self._losses) / len(self._losses)], dtype=torch.float32)
        self.client.allreduce(t, self._loss_key)
        mean = t.item() / self.world
        self._losses = []
        if self.steps >= self.warmup_steps and self._prev_mean is not None and \
                self._prev_mean != 0:
            change = (self._prev_mean - mean) / abs(self._prev_mean)
            if change < -self.plateau:
                self.period = max(1, self.period // 2)
            else:
                self.period = min(self.max_period, self.period * 2)
        self._prev_mean = mean
        if self.steps >= self.warmup_steps:
            self.periods.append(self.period)

    @torch.no_grad()
    def step(self, loss=None):
        """The local average, the optimizer's step, and the global average
        when due. loss (the step's, a float) drives the period."""
        self._local_average()
        self.optimizer.step()
        self.steps += 1
        self._since += 1
        if self._pending is not None and self.steps - self._pending[3] >= self.stale_steps:
            self._land()
        warm = self.steps <= self.warmup_steps
        if self._pending is None and (warm or self._since >= self.period):
            self._since = 0
            buf = self._flat()
            sent = buf.clone()   # (before the sum starts writing into buf)
            self._pending = (self.client.iallreduce(buf, self._key), buf, sent, self.steps)
            if warm or self.stale_steps == 0:
                self._land()
        self._adapt(loss)

    def close(self):
        """Wait for a global sum in flight (taking it), close an own client."""
        if self._pending is not None:
            self._land()
        if self._own_client:
            self.client.close()
