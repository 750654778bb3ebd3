# SPDX-License-Identifier: BSD-3-Clause
"""host_topk_check.py - for test_host_local_torch.sh, under torchrun with 4
ranks as 2 hosts of 2 (pbox.Client(local_world=2)): DDP with
pbox.torch.topk_hook (5%, momentum correction, the small tensors sent
whole) through the host level, where local rank 0 of each host runs the
top-k engine on the host's sum (TopkState(host=True), the default).
Every process also replays the whole job on its own (every rank's
gradient from the seeds, each host's sum in local rank order, one engine
per host, the hosts' entries and whole values summed in host order, the
mean, the same SGD step) and checks, printing "host topk: N passed, 0
failed" (or the failures):
  - after every step the model equals the replay's, element for element;
  - the local ranks 1 selected nothing (their engines sent no entry), the
    local ranks 0 as many entries as the replay's engines of their hosts;
  - the loss (summed over the ranks) falls."""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import pbox
import pbox._sparse as sp
import pbox.torch as pt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from checks import Tally  # noqa: E402  (tests/python/checks.py)

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
L, STEPS = 2, 12
check = Tally()


def make_model():
    torch.manual_seed(0)
    # w1 (2048) is sparse; b1, w2, b2 (under dense_below) go whole
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))


TEACHER = torch.randn(32, 8, generator=torch.Generator().manual_seed(7)) / 4


def batch(step, r):
    g = torch.Generator().manual_seed(1000 * step + r)
    x = torch.randn(32, 32, generator=g)
    return x, torch.tanh(x @ TEACHER)


class Bucket:
    """The replay's stand-in for a DDP bucket: the parameters in model
    order (the engine selects in that order either way)."""

    def __init__(self, params):
        self._p = list(params)
        self._buf = torch.zeros(sum(p.numel() for p in self._p))

    def parameters(self):
        return self._p

    def buffer(self):
        return self._buf


client = pbox.Client(local_rank=rank % L, local_world=L)
check(client.host_layout == (rank % L, L), f"host_layout {client.host_layout}")
model = make_model()
ddp = DDP(model)
state = pt.TopkState(client, name="hosttopk", density=0.05, momentum=0.9, warmup=0,
                     min_entries=0)   # (a real selection of this small model)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
state.attach(opt)
ddp.register_comm_hook(state, pt.topk_hook)

ref = make_model()
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
e0 = state.engine
engines = []
for _ in range(world // L):
    e = sp.Engine(e0.density, e0.error_feedback, e0.momentum, e0.nesterov, e0.masking, e0.clip,
                  e0.schedule, e0.dense_below, e0.select, e0.max_idle)
    e.min_entries = e0.min_entries
    e.params = list(ref.parameters())
    engines.append(e)
bucket = Bucket(ref.parameters())
first = last = None
for step in range(STEPS):
    x, y = batch(step, rank)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(ddp(x), y)
    loss.backward()
    opt.step()
    losses = torch.tensor([loss.item()])
    dist.all_reduce(losses)   # (Gloo: the mean over the ranks' batches)
    first = losses.item() if first is None else first
    last = losses.item()
    # the replay
    grads = []
    for r in range(world):
        ref.zero_grad()
        rx, ry = batch(step, r)
        torch.nn.functional.mse_loss(ref(rx), ry).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in ref.parameters()]))
    out = torch.zeros_like(grads[0])
    wsum = None
    for h, e in enumerate(engines):
        g = grads[h * L].clone()
        for l in range(1, L):
            g += grads[h * L + l]
        idx, val, whole, wval = e.prepare("k", bucket, g, world // L, split=True, ranks=L)
        e.step += 1
        out[idx] += val
        if whole is not None:
            wsum = wval.clone() if wsum is None else wsum + wval
    if wsum is not None:
        out[whole] = wsum
    out /= world
    off = 0
    for p in ref.parameters():
        p.grad = out[off:off + p.numel()].view_as(p).clone()
        off += p.numel()
    ref_opt.step()
    for i, (a, b) in enumerate(zip(model.parameters(), ref.parameters())):
        check(torch.equal(a.detach(), b.detach()),
              f"step {step}: parameter {i} differs from the replay's by up to "
              f"{(a.detach() - b.detach()).abs().max().item():g}")
host = rank // L
if rank % L:
    check(state.engine.sent == 0, f"local rank {rank % L} selected {state.engine.sent} entries")
else:
    check(state.engine.sent == engines[host].sent and state.engine.sent > 0,
          f"host {host}'s leader sent {state.engine.sent} entries, the replay "
          f"{engines[host].sent}")
check(last < first, f"the loss did not fall: {first} -> {last}")
dist.barrier()
print(f"host topk: rank {rank}: {check.ok} passed, {len(check.bad)} failed; entries "
      f"{state.engine.sent}, loss {first:.4f} -> {last:.4f}"
      + "".join(f"\n  FAIL {b}" for b in check.bad[:10]))
client.close()
sys.exit(1 if check.bad else 0)
