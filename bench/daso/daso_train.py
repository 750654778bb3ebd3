# SPDX-License-Identifier: BSD-3-Clause
"""daso_train.py - one rank of bench/daso/daso_compare.sh, under torchrun
(hosts of LOCAL_WORLD_SIZE ranks): a teacher-student regression on an MLP
large enough that averaging its gradients is what a step waits for, trained
for --steps steps with SGD and momentum, either

  ddp   torch DDP on the pbox backend: every step's gradients through the
        box (dist.init_process_group("pbox"));
  daso  pbox.torch.DASO: gradients averaged inside the host every step (a
        Gloo group of the host's ranks), parameters through the box every
        H steps, H adapted (dist.init_process_group("gloo") for the host
        groups, a pbox.Client for the box).

Every rank draws its own batches (seeded by rank and step); the teacher (a
small random MLP, its weights scaled by --teacher-scale) is the same on
all. The defaults (batch 8, lr 0.1) keep a step's computing (about 0.1 s
on one core here) below its averaging through a 1 Gbit/s link. At the end each rank measures the loss of its own
parameters on a held-out set (the same on every rank) and rank 0 prints
one line "daso_train: {json}" with the mean over ranks of that loss, the
mean training loss of the last 10 steps, the wall time of the steps (the
slowest rank's), and DASO's global averages and periods.
"""
import argparse
import json
import sys
import time

import torch
import torch.distributed as dist

import pbox.torch


def mlp(width, depth, dim):
    layers, d = [], dim
    for _ in range(depth):
        layers += [torch.nn.Linear(d, width), torch.nn.Tanh()]
        d = width
    layers.append(torch.nn.Linear(d, dim))
    return torch.nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("ddp", "daso", "daso-stale"), required=True,
                    help="daso-stale: DASO with stale_steps=1 (each global sum "
                         "overlapped with the next step)")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--teacher-scale", type=float, default=3.0)
    ap.add_argument("--name", default="daso-bench")
    a = ap.parse_args()
    if a.steps < 20:
        sys.exit("daso_train: --steps must be at least 20")
    torch.set_num_threads(1)
    dist.init_process_group("pbox" if a.mode == "ddp" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(1)
    teacher = mlp(64, 1, a.dim)
    with torch.no_grad():   # outputs of a size the student must learn
        for p in teacher.parameters():
            p.mul_(a.teacher_scale)
    torch.manual_seed(2)
    model = mlp(a.width, a.depth, a.dim)
    nparams = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    if a.mode == "ddp":
        net = torch.nn.parallel.DistributedDataParallel(model)
        daso = None
    else:
        net = model
        daso = pbox.torch.DASO(model, opt, name=a.name,
                               stale_steps=1 if a.mode == "daso-stale" else 0)

    def batch(seed, n):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, a.dim, generator=g)
        with torch.no_grad():
            y = teacher(x) + 0.01 * torch.randn(n, a.dim, generator=g)
        return x, y

    losses = []
    dist.barrier()
    t0 = time.monotonic()
    for step in range(a.steps):
        x, y = batch(1_000_003 * step + rank, a.batch)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        if daso:
            daso.step(loss.item())
        else:
            opt.step()
        losses.append(loss.item())
    wall = torch.tensor([time.monotonic() - t0])
    x, y = batch(7, 512)
    with torch.no_grad():
        held = torch.nn.functional.mse_loss(model(x), y).item()
    out = torch.tensor([held, sum(losses[-10:]) / 10])
    if daso:
        daso.close()
    # the results, over the host group's backend: mean losses, slowest time
    dist.all_reduce(out)
    dist.all_reduce(wall, op=dist.ReduceOp.MAX)
    if rank == 0:
        r = {"mode": a.mode, "world": world, "steps": a.steps, "params": nparams,
             "held_out_loss": out[0].item() / world, "train_loss_last10": out[1].item() / world,
             "first_loss": losses[0], "wall_s": wall.item()}
        if daso:
            r.update(global_syncs=daso.global_syncs, periods=daso.periods)
        print("daso_train: " + json.dumps(r), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
