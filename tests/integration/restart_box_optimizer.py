# SPDX-License-Identifier: BSD-3-Clause
"""restart_box_optimizer.py RANK WORLD JOB STEPS PROGRESS - for
test_restart.sh: one rank of a BoxOptimizer (SGD with momentum on the box,
replay_steps=64) training a small model on data fixed by the step number;
the box may be killed and started again meanwhile. Rewrites PROGRESS with
the step after each step; prints "replays R rejoins J" and "digest D"
(sha256 of the final parameters)."""
import hashlib
import sys
import time

import torch

import pbox
import pbox.torch

rank, world, job, steps, prog = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], \
    int(sys.argv[4]), sys.argv[5]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
client = pbox.Client(job=job, rank=rank, world=world, timeout_ms=60000)
opt = pbox.torch.BoxOptimizer(model.parameters(), "sgd", client, lr=0.05, momentum=0.9,
                              name="rb", replay_steps=64)
for s in range(steps):
    g = torch.Generator().manual_seed(1000 * s + rank)
    x = torch.randn(32, 64, generator=g)
    y = torch.randint(0, 8, (32,), generator=g)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    with open(prog + ".tmp", "w") as f:
        f.write(f"{s + 1}\n")
    import os
    os.replace(prog + ".tmp", prog)
    time.sleep(0.05)
h = hashlib.sha256()
for p in model.parameters():
    h.update(p.detach().numpy().tobytes())
print(f"replays {opt.replays} rejoins {client.stats()['rejoins']}")
print(f"digest {h.hexdigest()[:16]}")
opt.close() if hasattr(opt, "close") else None
client.close()
