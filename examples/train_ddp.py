#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""train_ddp.py - a small MLP trained with PyTorch DDP; gradients summed by
pbox (--backend pbox, or the hook: --pbox) or by Gloo's allreduce (default).

    torchrun --nproc_per_node 4 examples/train_ddp.py --backend pbox  # PBOX_CONTROL set
    torchrun --nproc_per_node 4 examples/train_ddp.py --pbox          # + PBOX_JOB
    torchrun --nproc_per_node 4 examples/train_ddp.py                 # plain Gloo

--device cuda: the model and data on GPU LOCAL_RANK (modulo the GPUs there
are: NCCL needs one per rank, Gloo and pbox do not); the buckets are CUDA
tensors, summed through the box by libpbox's GPU staging (docs/gpu.md) with
--pbox or --backend pbox, or by --backend nccl / gloo. Without a CUDA
device, or (with pbox) without libpbox's GPU library, it stops at once and
says which is missing.

--backend pbox: torch.distributed's "pbox" backend (import pbox.torch;
init_process_group("pbox")): DDP needs no hook, everything it does goes
to the box, and the job name comes from the c10d store. --pbox: a Gloo
process group does DDP's set-up work and only the gradient buckets go
through the box, via the two lines marked below.

Synthetic data: a fixed random linear teacher labels Gaussian inputs into
10 classes; every (step, micro-batch, rank) draws its own batch from a
generator seeded by --seed, so runs with the same seed see the same data.

--out FILE writes JSON (rank 0): per-step losses (rank 0's local loss,
mean over its micro-batches), final parameters, whether all ranks ended
with bit-identical parameters, and the pbox keys used.
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
from torch.nn.parallel import DistributedDataParallel as DDP

IN, HID, OUT = 32, 64, 10


class MLP(nn.Module):
    def __init__(self, unused=False):
        super().__init__()
        self.fc1 = nn.Linear(IN, HID)
        self.fc2 = nn.Linear(HID, HID)
        self.fc3 = nn.Linear(HID, OUT)
        # a head that forward() never uses: needs find_unused_parameters=True
        self.spare = nn.Linear(HID, OUT) if unused else None

    def forward(self, x):
        x = torch.tanh(self.fc1(x))
        x = torch.tanh(self.fc2(x))
        return self.fc3(x)


def batch(seed, step, micro, rank, n):
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + micro * 101 + rank)
    teacher = torch.Generator().manual_seed(seed)
    w = torch.randn(IN, OUT, generator=teacher)
    x = torch.randn(n, IN, generator=g)
    y = (x @ w + 0.5 * torch.randn(n, OUT, generator=g)).argmax(dim=1)
    return x, y


def params_digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    # a rank that hangs says where when torchrun stops it (SIGTERM)
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["gloo", "pbox", "nccl"], default="gloo",
                    help="torch.distributed backend (pbox: everything on the box, no hook)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where the model and its gradients live (cuda: GPU LOCAL_RANK "
                         "modulo the GPUs)")
    ap.add_argument("--pbox", action="store_true", help="sum gradients on the pbox box (hook)")
    ap.add_argument("--hook", choices=["fp32", "fp16", "bf16"], default=None,
                    help="pbox hook (--pbox): full precision (default) or half-width on the wire")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32, help="per-rank micro-batch size")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--accum", type=int, default=1,
                    help="micro-batches per step; all but the last under no_sync()")
    ap.add_argument("--unused", action="store_true",
                    help="add a never-used layer and find_unused_parameters=True")
    ap.add_argument("--bucket-kb", type=float, default=16,
                    help="DDP bucket_cap (KiB); small so the model spans several buckets")
    ap.add_argument("--first-bucket-kb", type=float, default=8,
                    help="DDP's first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES, KiB)")
    ap.add_argument("--job", default=None,
                    help="pbox job name of the hook (--pbox; default $PBOX_JOB or run id)")
    ap.add_argument("--out", default=None, help="write results as JSON (rank 0)")
    args = ap.parse_args()
    if not args.pbox and (args.hook is not None or args.job is not None):
        # --backend pbox takes its job name from the c10d store, and has no hook
        ap.error("--hook and --job are for the hook: add --pbox")
    args.hook = args.hook or "fp32"

    torch.set_num_threads(1)
    device = torch.device("cpu")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print(f"train_ddp.py: --device cuda: torch sees no CUDA device "
                  f"(torch {torch.__version__}, built with CUDA "
                  f"{torch.version.cuda or 'no'}; nvidia-smi -L lists the GPUs)",
                  file=sys.stderr, flush=True)
            return 2
        # more ranks than GPUs (a one-GPU host) share them round-robin
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) %
                              torch.cuda.device_count())
        torch.cuda.set_device(device)
    elif args.backend == "nccl":
        print("train_ddp.py: --backend nccl needs --device cuda", file=sys.stderr)
        return 2
    if args.backend == "pbox":
        import pbox.torch  # noqa: F401  (registers the backend)
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(args.seed)            # same init everywhere; DDP broadcasts rank 0's anyway
    model = MLP(unused=args.unused).to(device)
    # Small buckets, so that this tiny model spans several of them and DDP's
    # rebuild after step 0 (one bucket -> several) changes bucket sizes.
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(args.first_bucket_kb * 1024)
    ddp = DDP(model, bucket_cap_mb=args.bucket_kb / 1024, find_unused_parameters=args.unused,
              device_ids=[device.index] if device.type == "cuda" else None)

    state = None
    if args.pbox:
        import pbox
        import pbox.torch
        # --- the two lines ---
        state = pbox.torch.State(pbox.Client(job=args.job))
        ddp.register_comm_hook(state, pbox.torch.HOOKS[args.hook])
        if device.type == "cuda":
            state.client.gpu_init()   # a missing GPU library is named now, not in backward

    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    losses = []
    t0 = time.time()
    for step in range(args.steps):
        opt.zero_grad(set_to_none=False)
        tot = 0.0
        for m in range(args.accum):
            x, y = batch(args.seed, step, m, rank, args.batch)   # the same on every device
            x, y = x.to(device), y.to(device)
            if m < args.accum - 1:
                with ddp.no_sync():
                    loss = F.cross_entropy(ddp(x), y) / args.accum
                    loss.backward()
            else:
                loss = F.cross_entropy(ddp(x), y) / args.accum
                loss.backward()
            tot += loss.item()
        opt.step()
        losses.append(tot)
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:3d} loss {tot:.6f}", flush=True)
    elapsed = time.time() - t0

    # do all ranks hold the same bytes? (gather each rank's digest over Gloo)
    digests = [None] * world
    dist.all_gather_object(digests, params_digest(model))
    identical = len(set(digests)) == 1

    keys = {}
    if state is not None:
        keys = {f"{i}/{n}/{d}": k for (i, n, d), k in state.keys.items()}
        state.close()
        state.client.close()
    if args.backend == "pbox":   # the calls the backend ran on the box and on Gloo
        calls = dist.distributed_c10d._get_default_group().calls
        via = f"backend pbox: {calls['box']} calls on the box, {calls['gloo']} on Gloo"
    else:
        via = f"pbox keys: {len(keys)}"
    if rank == 0:
        print(f"done: {args.steps} steps in {elapsed:.2f}s, ranks identical: {identical}, "
              f"{via}", flush=True)
        if args.out:
            out = {
                "mode": f"pbox-{args.hook}" if args.pbox else args.backend,
                "device": args.device,
                "world": world, "steps": args.steps, "seed": args.seed,
                "losses": losses,
                "params": {n: p.detach().cpu().flatten().tolist()
                           for n, p in model.named_parameters()},
                "ranks_identical": identical,
                "pbox_keys": keys,
                "seconds": elapsed,
            }
            tmp = args.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(out, f)
            os.replace(tmp, args.out)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
