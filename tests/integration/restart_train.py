# SPDX-License-Identifier: BSD-3-Clause
"""restart_train.py MODE CKPT_DIR STEPS FAIL_AT - for test_elastic.sh, under
torchrun --max-restarts 1 with 2 ranks: DDP training of a small model, SGD
with momentum, the gradients averaged by pbox (MODE backend: the "pbox"
process group; MODE hook: a Gloo group with pbox.torch.allreduce_hook, the
box job named by torchrun's TORCHELASTIC_RUN_ID, the same in both
attempts). After each step rank 0 saves model and optimizer atomically
(write, fsync, rename). In the first attempt rank 1 raises at step FAIL_AT
(-1: never); torchrun restarts the group, which resumes from the last
checkpoint and completes. Each rank prints
  "restart: rank R attempt A resumed at step S"   (S = 0: from the start)
  "restart: rank R done: digest D loss L"          (D: sha256 of the weights)
and rank 1's raise writes its monotonic time to CKPT_DIR/fault; the first
step after resuming prints "restart: back after T s" (from that fault)."""
import hashlib
import os
import sys
import time

import faulthandler
import torch
faulthandler.dump_traceback_later(180, exit=True)   # a hang ends with its stacks
import torch.distributed as dist

import pbox.torch

mode, ckdir, steps, fail_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
dist.init_process_group("pbox" if mode == "backend" else "gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
ckpt = os.path.join(ckdir, "ckpt.pt")
start = 0
if os.path.exists(ckpt):
    state = torch.load(ckpt)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start = state["step"]
print("restart: rank %d attempt %d resumed at step %d" % (rank, attempt, start), flush=True)
ddp = torch.nn.parallel.DistributedDataParallel(model)
hook_state = None
if mode == "hook":
    hook_state = pbox.torch.State()
    ddp.register_comm_hook(hook_state, pbox.torch.allreduce_hook)
loss = torch.zeros(())
for step in range(start, steps):
    if attempt == 0 and rank == 1 and step == fail_at:
        with open(os.path.join(ckdir, "fault"), "w") as f:
            f.write("%.6f\n" % time.monotonic())
        raise RuntimeError("restart_train: rank 1 fails at step %d (on purpose)" % step)
    g = torch.Generator().manual_seed(step * world + rank)
    x = torch.randn(16, 32, generator=g)
    y = torch.randint(0, 4, (16,), generator=g)
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(ddp(x), y)
    loss.backward()
    opt.step()
    if step == start and attempt > 0 and rank == 0:
        with open(os.path.join(ckdir, "fault")) as f:
            print("restart: back after %.2f s" % (time.monotonic() - float(f.read())), flush=True)
    if rank == 0:
        tmp = ckpt + ".tmp"
        with open(tmp, "wb") as f:
            torch.save({"step": step + 1, "model": model.state_dict(),
                        "opt": opt.state_dict()}, f)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, ckpt)
    dist.barrier()   # the next step starts from a saved state on every rank
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                 for p in model.parameters())).hexdigest()[:16]
print("restart: rank %d done: digest %s loss %.6f" % (rank, digest, loss.item()), flush=True)
if hook_state is not None:
    hook_state.close()
dist.destroy_process_group()
