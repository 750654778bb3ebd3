#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""train_topk.py - DDP training with sparse gradients: each rank sends only
the top 1% of its gradient (plus residual) through the box.

    PBOX_CONTROL=10.0.0.1:7470 \\
      torchrun --nproc_per_node 4 examples/train_topk.py --model mlp --hook topk
    torchrun --nproc_per_node 4 examples/train_topk.py --model cnn --hook dense

The box is $PBOX_CONTROL (host:port); the job name is $PBOX_JOB, else
torchrun's run id. A Gloo process group does DDP's set-up work.

--hook dense: pbox.torch.allreduce_hook (every entry); topk:
pbox.torch.topk_hook with a TopkState(density, error_feedback); --no-ef
drops what is not sent instead of keeping it as the residual; --warmup N
sets the density warm-up's length (0: none).

Synthetic data from a fixed teacher network (no dataset downloads here):
--model mlp: inputs of 64 Gaussian features, labels the argmax of a random
two-layer tanh teacher; --model cnn: 1x16x16 Gaussian images, labels the
argmax of a random small convolutional teacher. Each (step, rank) draws
its own batch from a generator seeded by --seed, so runs with the same seed
see the same data; the student starts from the same weights.

Rank 0 prints the loss every 50 steps and, at the end, "final loss X":
the trained model's loss on 4096 held-out samples from the same teacher
(the same samples for every run); --out FILE writes it with every step's
minibatch loss as JSON.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

CLASSES = 10


def mlp():
    return nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(),
                         nn.Linear(256, CLASSES))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(),
                         nn.Linear(64, CLASSES))


# builder, input shape, teacher weight gain, default learning rate
MODELS = {"mlp": (mlp, (64,), 1.0, 0.1), "cnn": (cnn, (1, 16, 16), 3.0, 0.05)}


def teacher(kind, seed):
    torch.manual_seed(10_000 + seed)
    t = MODELS[kind][0]()
    for p in t.parameters():
        p.requires_grad_(False)
        p.mul_(MODELS[kind][2])   # cnn: sharper class boundaries than the default init
    return t


def batch(kind, t, seed, step, rank, n):
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + rank)
    x = torch.randn((n,) + MODELS[kind][1], generator=g)
    return x, t(x).argmax(dim=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(MODELS), default="mlp")
    ap.add_argument("--hook", choices=["dense", "topk"], default="topk")
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--no-ef", action="store_true", help="no error feedback")
    ap.add_argument("--momentum-correction", action="store_true",
                    help="top-k: the momentum (0.9) accumulated before selection on the "
                         "worker (Deep Gradient Compression), the optimizer without momentum")
    ap.add_argument("--warmup", type=int, default=None,
                    help="top-k: steps of the density warm-up from 25%% (default: "
                         "TopkState's, 100; 0: the target density from the start)")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=None, help="default: per model")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import pbox
    import pbox.torch

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = teacher(args.model, args.seed)
    torch.manual_seed(args.seed)
    model = MODELS[args.model][0]()
    ddp = DDP(model)
    client = pbox.Client()
    if args.hook == "dense":
        state = pbox.torch.State(client, name="dense")
        ddp.register_comm_hook(state, pbox.torch.allreduce_hook)
    else:
        state = pbox.torch.TopkState(client, density=args.density,
                                     error_feedback=not args.no_ef,
                                     momentum=0.9 if args.momentum_correction else 0.0,
                                     warmup=args.warmup)
        ddp.register_comm_hook(state, pbox.torch.topk_hook)
    lr = args.lr if args.lr is not None else MODELS[args.model][3]
    opt = torch.optim.SGD(ddp.parameters(), lr=lr,
                          momentum=0.0 if args.momentum_correction else 0.9)
    losses = []
    t0 = time.time()
    for step in range(args.steps):
        x, y = batch(args.model, t, args.seed, step, rank, args.batch)
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if rank == 0 and step % 50 == 0:
            print(f"step {step:4d} loss {losses[-1]:.4f}", flush=True)
    # the final model's loss on 4096 held-out samples (the same for every
    # run): steadier than the last minibatches' losses
    with torch.no_grad():
        x, y = batch(args.model, t, args.seed + 7919, 0, 0, 4096)
        final = F.cross_entropy(model(x), y).item()
    sent = client.stats()["bytes_sent"]
    nparams = sum(p.numel() for p in model.parameters())
    state.close()
    client.close()
    if rank == 0:
        print(f"final loss {final:.5f} ({args.model}, {args.hook}"
              f"{'' if args.hook == 'dense' else ', density %g, %s' % (args.density, 'no error feedback' if args.no_ef else 'error feedback')}"
              f", {nparams} parameters, {args.steps} steps in {time.time() - t0:.1f} s, "
              f"{sent} bytes sent by rank 0)", flush=True)
        if args.out:
            with open(args.out + ".tmp", "w") as f:
                json.dump({"final": final, "losses": losses, "bytes_sent": sent,
                           "params": nparams}, f)
            os.replace(args.out + ".tmp", args.out)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
