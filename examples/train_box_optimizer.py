#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""train_box_optimizer.py - a small MLP trained with the optimizer on the
pbox box (PS mode: pbox.torch.BoxOptimizer), no DDP.

    PBOX_CONTROL=10.0.0.1:7470 PBOX_JOB=run42 \\
      torchrun --nproc_per_node 4 examples/train_box_optimizer.py [--optimizer adam]

Every rank builds the same model and a BoxOptimizer in place of
torch.optim.SGD/Adam/AdamW (the lines marked below); the box averages the
ranks' gradients, runs the optimizer in fp32 and sends every rank the
updated weights in the same round trip. Nothing else of the training loop
changes: zero_grad, backward, step, an lr scheduler.

torchrun only starts the processes here (RANK, WORLD_SIZE); the Gloo
process group is used once, at the end, to show that all ranks hold the
same bytes. Synthetic data: a fixed random linear teacher labels Gaussian
inputs into 10 classes; each (step, rank) draws its own batch.

--out FILE writes JSON (rank 0): per-step losses, whether all ranks ended
with bit-identical parameters, the PS keys used, seconds.
"""
import argparse
import faulthandler
import hashlib
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import pbox
import pbox.torch

IN, HID, OUT = 32, 64, 10


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN, HID)
        self.fc2 = nn.Linear(HID, HID)
        self.fc3 = nn.Linear(HID, OUT)

    def forward(self, x):
        x = torch.tanh(self.fc1(x))
        x = torch.tanh(self.fc2(x))
        return self.fc3(x)


def batch(seed, step, rank, n):
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + rank)
    teacher = torch.Generator().manual_seed(seed)
    w = torch.randn(IN, OUT, generator=teacher)
    x = torch.randn(n, IN, generator=g)
    y = (x @ w + 0.5 * torch.randn(n, OUT, generator=g)).argmax(dim=1)
    return x, y


def params_digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def hyperparameters(args):
    if args.optimizer == "sgd":
        lr = 0.1 if args.lr is None else args.lr         # --lr 0 is 0
        return dict(lr=lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    lr = 3e-3 if args.lr is None else args.lr
    return dict(lr=lr, weight_decay=1e-4 if args.optimizer == "adam" else 1e-2)


def main():
    # a rank that hangs says where when torchrun stops it (SIGTERM)
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--optimizer", choices=["sgd", "adam", "adamw"], default="sgd")
    ap.add_argument("--lr", type=float, default=None,
                    help="learning rate (default: 0.1 for SGD, 3e-3 for Adam(W))")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32, help="per-rank batch size")
    ap.add_argument("--overlap", action="store_true",
                    help="push each bucket during backward as soon as its gradients are ready")
    ap.add_argument("--job", default=None, help="pbox job name (default $PBOX_JOB or run id)")
    ap.add_argument("--out", default=None, help="write results as JSON (rank 0)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)     # rank 0's init wins anyway: the box starts from it
    model = MLP()
    client = pbox.Client(job=args.job)
    rank, world = client.rank, client.world

    # --- instead of torch.optim.SGD(model.parameters(), lr=..., momentum=...) ---
    opt = pbox.torch.BoxOptimizer(model.parameters(), args.optimizer, client,
                                  overlap=args.overlap, **hyperparameters(args))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps)

    losses = []
    t0 = time.time()
    for step in range(args.steps):
        opt.zero_grad(set_to_none=True)
        x, y = batch(args.seed, step, rank, args.batch)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        lr = opt.param_groups[0]["lr"]   # the lr this step's pushes carry
        opt.step()                   # gradients to the box, updated weights back
        sched.step()
        losses.append(loss.item())
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:3d} loss {loss.item():.6f} lr {lr:.5f}", flush=True)
    elapsed = time.time() - t0
    keys = opt.keys
    opt.close()
    client.close()

    # do all ranks hold the same bytes? (each rank's digest over Gloo, once)
    dist.init_process_group("gloo")
    digests = [None] * world
    dist.all_gather_object(digests, params_digest(model))
    identical = len(set(digests)) == 1
    if rank == 0:
        print(f"done: {args.steps} steps of {args.optimizer} on the box in {elapsed:.2f}s, "
              f"ranks identical: {identical}, PS keys: {len(keys)}", flush=True)
        if args.out:
            out = {"optimizer": args.optimizer, "world": world, "steps": args.steps,
                   "seed": args.seed, "losses": losses, "ranks_identical": identical,
                   "ps_keys": [k for k, *_ in keys], "seconds": elapsed}
            tmp = args.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(out, f)
            os.replace(tmp, args.out)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
