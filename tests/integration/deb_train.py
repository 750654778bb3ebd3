#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""deb_train.py - one training step of a small model on 2 ranks through the
installed python3-pbox (test_deb.sh): the package and the library it loads
must be the installed ones (/usr/lib/python3/dist-packages,
/usr/lib/<multiarch>/libpbox.so.0); on init_process_group("pbox"), the
parameters broadcast from rank 0 and each gradient averaged (all_reduce
AVG) must give each rank the mean of both ranks' gradients bit for bit (every rank
computes both ranks' gradients itself from seeds: the mean of two float32
values is exact as the box computes it, a sum rounded once then halved),
and the parameters after an SGD step must equal the reference's.

Run as: python3 -I deb_train.py with RANK, WORLD_SIZE (2), MASTER_ADDR,
MASTER_PORT and PBOX_CONTROL set; prints "deb train: rank R ok".
"""
import os
import sys

import torch
import torch.distributed as dist

import pbox
import pbox.torch  # noqa: F401  (registers the backend)


def fail(msg):
    sys.exit(f"deb train: rank {os.environ.get('RANK')}: FAIL: {msg}")


def model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))


def batch(rank):
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(16, 32, generator=g), torch.randn(16, 4, generator=g)


def grads(m, rank):
    m.zero_grad()
    x, y = batch(rank)
    torch.nn.functional.mse_loss(m(x), y).backward()
    return [p.grad.clone() for p in m.parameters()]


def main():
    if not pbox.__file__.startswith("/usr/lib/python3/dist-packages/pbox/"):
        fail(f"pbox comes from {pbox.__file__}, not the installed package")
    dist.init_process_group("pbox")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 2:
        fail(f"world {world}, want 2")

    ref = model()
    g = [grads(ref, r) for r in range(world)]
    want = [(a + b) / 2 for a, b in zip(*g)]
    for p, w in zip(ref.parameters(), want):
        p.grad = w.clone()
    torch.optim.SGD(ref.parameters(), lr=0.1).step()
    after = [p.detach().clone() for p in ref.parameters()]

    # DDP's steps by hand: parameters from rank 0, each gradient averaged
    # (DDP itself is not used: its construction's _broadcast_coalesced on a
    # pbox group hung here, 2 ranks, torch 1.13)
    m = model()
    with torch.no_grad():
        for p in m.parameters():
            if rank != 0:
                p.add_(1.0)         # rank 0's values must win
            dist.broadcast(p, 0)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x, y = batch(rank)
    opt.zero_grad()
    torch.nn.functional.mse_loss(m(x), y).backward()
    for p in m.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
    for i, (p, w) in enumerate(zip(m.parameters(), want)):
        if not torch.equal(p.grad, w):
            fail(f"parameter {i}: gradient differs from the mean of both ranks' "
                 f"(max diff {(p.grad - w).abs().max().item()})")
    opt.step()
    for i, (p, w) in enumerate(zip(m.parameters(), after)):
        if not torch.equal(p.detach(), w):
            fail(f"parameter {i} after the step differs from the reference")
    dist.barrier()
    # library_path() is the name the loader was given (libpbox.so.0), loaded
    # at the first call: the file is the one mapped
    with open("/proc/self/maps") as f:
        maps = {ln.split()[-1] for ln in f if "libpbox.so" in ln}
    if len(maps) != 1:
        fail(f"libpbox mapped from {sorted(maps)} (library_path {pbox.library_path()})")
    lib = maps.pop()
    if not (lib.startswith(("/usr/lib/", "/lib/")) and "/libpbox.so.0" in lib):
        fail(f"pbox loaded {lib}, not the installed libpbox0")
    dist.destroy_process_group()
    print(f"deb train: rank {rank} ok (pbox {pbox.__version__} from {pbox.__file__}, "
          f"library {lib})", flush=True)


if __name__ == "__main__":
    main()
