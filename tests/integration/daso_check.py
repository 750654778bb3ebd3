# SPDX-License-Identifier: BSD-3-Clause
"""daso_check.py - for test_daso.sh, under torchrun with 4 ranks as 2
"hosts" of 2 (local_size=2): pbox.torch.DASO on a small regression task.
Checks, printing "daso: N passed, 0 failed" (or the failures):
  - bad arguments raise at construction;
  - after every step the ranks of a host hold the same bits;
  - during the warm-up (blocking global average every step) and at each
    global average after it, all 4 ranks hold the same bits;
  - between global averages the hosts drift apart (so the averaging is
    what joins them);
  - the period grows once the loss settles, and the loss falls;
  - stale_steps=1 (the global sum overlapped with the next step): a sum
    sent after the warm-up lands one step later, and each rank then holds
    its parameters of that moment minus what it sent plus the mean of
    what all ranks sent (DASO's stale update), the ranks of a host the
    same bits; during the warm-up it lands at once."""
import hashlib
import os
import sys

import torch
import torch.distributed as dist

import pbox.torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from checks import Tally  # noqa: E402  (tests/python/checks.py)

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
check = Tally()


def digests(model):
    h = hashlib.sha256(torch.cat([p.detach().reshape(-1) for p in model.parameters()])
                       .numpy().tobytes()).hexdigest()[:16]
    out = [None] * world
    dist.all_gather_object(out, h)
    return out


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for kw in ({"max_period": 0}, {"plateau": 2.0}, {"local_size": 3}):
    try:
        pbox.torch.DASO(model, opt, name="daso-bad", **kw)
        check(False, f"DASO({kw}) did not raise")
    except ValueError:
        check(True, "")
daso = pbox.torch.DASO(model, opt, local_size=2, name="daso-check", warmup_steps=10,
                       max_period=8, window=5, plateau=0.3)
w = torch.randn(16, 1, generator=torch.Generator().manual_seed(7))
first = last = None
drifted = synced_after = 0
for step in range(1, 61):
    g = torch.Generator().manual_seed(1000 * step + rank)   # each rank its own batch
    x = torch.randn(64, 16, generator=g)
    y = x @ w + 0.01 * torch.randn(64, 1, generator=g)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    syncs = daso.global_syncs
    daso.step(loss.item())
    d = digests(model)
    host = rank // 2
    check(d[2 * host] == d[2 * host + 1], f"step {step}: the ranks of host {host} differ")
    if daso.global_syncs > syncs:
        check(len(set(d)) == 1, f"step {step}: ranks differ right after a global average")
        synced_after += step > 10
    elif len(set(d)) > 1:
        drifted += 1
    first = first if first is not None else loss.item()
    last = loss.item()
check(daso.global_syncs >= 10, f"only {daso.global_syncs} global averages")
check(synced_after >= 1, "no global average after the warm-up")
check(drifted >= 1, "the hosts never drifted apart between global averages")
check(max(daso.periods or [1]) > 1, f"the period never grew: {daso.periods}")
check(last < first * 0.5, f"the loss did not fall: {first} -> {last}")
if rank == 0:
    print(f"daso: periods {daso.periods}, {daso.global_syncs} global averages in 60 steps, "
          f"loss {first:.4f} -> {last:.4f}")
daso.close()


class Probe(pbox.torch.DASO):
    """DASO that records what each landing started from."""
    probe = None

    def _land(self):
        _, _, sent, at = self._pending
        self.probe = (self._flat(), sent.clone(), at, self.steps)
        super()._land()


def flat(m):
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
stale = Probe(model, opt, local_size=2, name="daso-stale", warmup_steps=4, max_period=4,
              window=4, plateau=0.3, stale_steps=1)
late = at_once = 0
first = last = None
for step in range(1, 41):
    g = torch.Generator().manual_seed(5000 * step + rank)
    x = torch.randn(64, 16, generator=g)
    y = x @ w + 0.01 * torch.randn(64, 1, generator=g)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    stale.probe = None
    stale.step(loss.item())
    d = digests(model)
    check(d[2 * (rank // 2)] == d[2 * (rank // 2) + 1],
          f"stale step {step}: the ranks of host {rank // 2} differ")
    if stale.probe is not None:
        now, sent, at, st = stale.probe
        every = [torch.zeros_like(sent) for _ in range(world)]
        dist.all_gather(every, sent)
        mean = torch.stack(every).double().sum(0) / world
        want = now.double() - sent.double() + mean
        got = flat(model).double()
        err = (got - want).abs().max().item()
        check(err < 1e-5, f"stale step {step}: the landing is {err:.3g} off "
              "p_now - p_sent + mean")
        if at <= 4:
            check(st == at, f"stale step {step}: a warm-up sum landed at {st}, sent at {at}")
            at_once += 1
        else:
            check(st == at + 1, f"stale step {step}: a sum sent at {at} landed at {st}")
            late += 1
    first = first if first is not None else loss.item()
    last = loss.item()
check(at_once == 4, f"{at_once} warm-up landings, want 4")
check(late >= 3, f"only {late} stale landings after the warm-up")
check(last < first * 0.5, f"stale: the loss did not fall: {first} -> {last}")
if rank == 0:
    print(f"daso: stale_steps=1: {at_once} landings at once, {late} a step late, "
          f"periods {stale.periods}, loss {first:.4f} -> {last:.4f}")
stale.close()
print(f"daso: {check.ok} passed, {len(check.bad)} failed" +
      ("".join("\n  FAIL " + b for b in check.bad)))
dist.destroy_process_group()
sys.exit(1 if check.bad else 0)
