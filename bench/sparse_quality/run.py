# SPDX-License-Identifier: BSD-3-Clause
"""run.py - train one task of the suite under several gradient exchanges on
WORLD ranks (a Gloo process group; the box is stood in for by
glooclient.GlooClient unless --box: then pbox.Client() from the
environment, PBOX_CONTROL and PBOX_JOB) and write one JSON per run.

    python3 run.py --task mlp --steps 300 --runs dense,topk:0.01,psgd:1 --out DIR

Runs (each may end in :lr=X: the task at another learning rate):
dense (DDP's own allreduce), topk:DENSITY[:key=value,...] (topk_hook
with pbox.torch.TopkSGD, or TopkAdam for the Adam task; plain=true: the
task's torch.optim.Adam on the averaged sparse gradient, error feedback
alone),
topkhost:DENSITY[:local=L,...] (top-k through the host level, emulated:
hosts of L ranks (default 2) sum densely, each host's leader sends the
top DENSITY of the host's sum; bytes per step are a leader's),
psgd:RANK (torch's powerSGD_hook, start_powerSGD_iter 2) and
topkeq:RANK (top-k at the density that sends PowerSGD rank RANK's bytes
per step, without warm-up and min_entries 0 unless given, dense_below halved until the
tensors sent whole take at most half of those bytes unless given: PowerSGD rank RANK must have run
before, in the same call or into the same --out with the same steps).

Per run: final loss (mean minibatch loss of the last 10% of the steps over
all ranks), bytes per step one rank sends (payload: dense 4 per element,
top-k 8 per entry and 4 per element of the tensors sent whole, PowerSGD 4 per element of its allreduces), time per
step (wall, steps 10 on), the worker-side top-k seconds per step and the
starvation counts of the top-k selection."""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import tasks  # noqa: E402
from glooclient import GlooClient  # noqa: E402


def _opts(spec):
    out = {}
    for kv in spec:
        k, v = kv.split("=", 1)
        try:
            out[k] = json.loads(v)
        except ValueError:
            out[k] = v
    return out


def one_run(task, kind, spec, steps, rank, world, box, done):
    lr = [kv for kv in spec if kv.startswith("lr=")]   # RUN:...:lr=X, another learning rate
    if lr:
        spec = [kv for kv in spec if not kv.startswith("lr=")]
        saved, task.lr, task.lr_tag = task.lr, float(lr[-1][3:]), ":" + lr[-1]
        try:
            return one_run(task, kind, spec, steps, rank, world, box, done)
        finally:
            task.lr, task.lr_tag = saved, ""
    import pbox.torch as pt
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as P
    model = task.model()
    ddp = DDP(model)
    nparams = sum(p.numel() for p in model.parameters())
    counted = [0]
    state = client = None
    orig = dist.all_reduce
    if kind == "dense":
        opt = task.optimizer(ddp.parameters())
    elif kind in ("topk", "topkeq", "topkhost"):
        kw = _opts(spec[1:])
        local = int(kw.pop("local", 2)) if kind == "topkhost" else 1
        if kind in ("topk", "topkhost"):
            density = float(spec[0])
        else:   # the density whose bytes match PowerSGD rank spec[0]'s
            b = done[f"psgd:{spec[0]}" + getattr(task, "lr_tag", "")]["bytes_per_step"]
            per = 8 if kw.get("whole", "dense") == "entries" else 4   # a whole-sent element
            below = int(kw.get("dense_below", pt.DENSE_BELOW))

            def whole(lim):
                return sum(p.numel() for p in model.parameters() if p.numel() < lim)
            # the tensors sent whole may take at most half of the budget:
            # dense_below halves until they do (unless given)
            if "dense_below" not in kw:
                while below > 1 and per * whole(below) > b / 2:
                    below //= 2
                kw["dense_below"] = below
            small = whole(below)
            density = min(1.0, max(1e-5, (b - per * small) / 8 / max(1, nparams - small)))
        if kind == "topkeq":   # the warm-up alone would send more than PowerSGD's budget,
            kw.setdefault("warmup", 0)   # and the selection's floor may
            kw.setdefault("min_entries", 0)
        plain = kw.pop("plain", False)
        moments = kw.pop("moments", "global")
        client = pbox_client() if box else GlooClient()
        state = pt.TopkState(client, density=density, model=model, **kw)
        if task.opt == "sgd":
            opt = pt.TopkSGD(ddp.parameters(), state, lr=task.lr, momentum=0.9)
        elif plain:   # torch.optim.Adam on the averaged sparse gradient
            opt = task.optimizer(ddp.parameters())
            state.attach(opt)
        else:
            opt = pt.TopkAdam(ddp.parameters(), state, lr=task.lr, moments=moments)
        if kind == "topkhost":
            ddp.register_comm_hook(_HostTopk(state, rank, world, local), _host_topk_hook)
        else:
            ddp.register_comm_hook(state, pt.topk_hook)
    elif kind == "psgd":
        ps = P.PowerSGDState(process_group=None, matrix_approximation_rank=int(spec[0]),
                             start_powerSGD_iter=2, min_compression_rate=2, random_seed=0)
        ddp.register_comm_hook(ps, P.powerSGD_hook)
        opt = task.optimizer(ddp.parameters())

        def counting(t, *a, **k):
            counted[0] += t.numel() * t.element_size()
            return orig(t, *a, **k)
        dist.all_reduce = counting
    else:
        raise ValueError(kind)
    losses, times = [], []
    try:
        for step in range(steps):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=False)
            loss = task.loss(ddp, step, rank)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
            losses.append(loss.item())
    finally:
        dist.all_reduce = orig
    tail = max(1, steps // 10)
    mine = torch.tensor(losses[-tail:])
    allr = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(allr, mine)
    final = float(torch.stack(allr).mean())
    if kind == "dense":
        bps = 4 * nparams
    elif kind == "psgd":
        bps = counted[0] / steps
    else:
        bps = client.stats()["bytes_sent"] / steps
    held = task.heldout(model) if hasattr(task, "heldout") else None
    res = {"final": final, "heldout": held, "bytes_per_step": bps, "params": nparams,
           "time_per_step": sum(times[10:]) / max(1, len(times) - 10),
           "curve": losses[::max(1, steps // 50)]}
    if state is not None:
        e = state.engine
        res.update(density=state.density, dense_below=e.dense_below,
                   topk_seconds_per_step=e.seconds / steps,
                   starved=e.starved, longest_idle=e.longest_idle, forced=e.forced,
                   options=_opts(spec[1:]))
        state.close()
    return res


class _HostTopk:
    """topkhost's hook state: the TopkState, this rank's host group (ranks
    host * local .. host * local + local - 1) and whether it leads it."""

    def __init__(self, state, rank, world, local):
        if world % local:
            raise ValueError(f"topkhost: local={local} does not divide the world {world}")
        groups = [dist.new_group(list(range(h * local, (h + 1) * local)))
                  for h in range(world // local)]
        self.state, self.group, self.leader = state, groups[rank // local], rank % local == 0
        self.local = local


def _host_topk_hook(hs, bucket):
    """Top-k through the host level, as HiTopKComm does (dense inside the
    host, sparse to the box), emulated on Gloo for the suite: the host's
    ranks sum the bucket densely, its leader runs the worker-side engine
    (momentum correction, error feedback, the schedule: TopkState's) on the
    host's sum and sends its entries, the others send none; density is per
    host. The rule of TopkState(host=True) under libpbox's host level
    (pbox/torch.py topk_hook), here on Gloo groups for the suite.
    Synchronous: a measure of training quality, not of time."""
    state, e = hs.state, hs.state.engine
    buf = bucket.buffer()
    last = bucket.is_last()
    key = state.key(bucket.index(), buf.numel(), buf.dtype, last)
    dist.all_reduce(buf, group=hs.group)
    if hs.leader:
        idx, val, whole, wval = e.prepare(key, bucket, buf, state.world // hs.local,
                                          split=True, ranks=hs.local)
    else:
        idx, val, whole, wval = e.follow(key, bucket, split=True)
    if last:
        e.step += 1
    out = torch.empty_like(buf)
    state.client.iallreduce_sparse(idx.numpy(), val.numpy(), out, key).wait()
    if whole is not None:
        state.client.iallreduce(wval, key ^ 0x40000000).wait()
        out[whole] = wval
    fut = torch.futures.Future()
    fut.set_result(out.div_(state.world))
    return fut


def pbox_client():
    import pbox
    return pbox.Client()


def worker(rank, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    task = tasks.TASKS[args.task](args.seed)
    done = {}
    if args.out and os.path.isdir(args.out):   # earlier runs' results (topkeq reads psgd's)
        for f in os.listdir(args.out):
            if f.startswith(args.task + "-psgd_") and f.endswith(".json"):
                with open(os.path.join(args.out, f)) as fh:
                    r = json.load(fh)
                if r.get("steps") == args.steps and r.get("seed", 1) == args.seed:
                    done[r["run"]] = r
    for run in args.runs.split(","):
        parts = run.split(":")
        t0 = time.time()
        res = one_run(task, parts[0], parts[1:], args.steps, rank, args.world, args.box, done)
        res.update(task=args.task, run=run, steps=args.steps, world=args.world, seed=args.seed,
                   seconds=time.time() - t0)
        done[run] = res
        if rank == 0:
            print(f"{args.task:12s} {run:28s} final {res['final']:.4f} "
                  + (f"held-out {res['heldout']:.4f} " if res["heldout"] is not None else "") +
                  f"bytes/step {res['bytes_per_step']:10.0f} "
                  f"ms/step {1e3 * res['time_per_step']:6.2f} "
                  f"({res['seconds']:.0f} s)"
                  + (f" starved {res['starved']} longest {res['longest_idle']} forced "
                     f"{res['forced']} topk ms/step {1e3 * res['topk_seconds_per_step']:.2f}"
                     if "starved" in res else ""), flush=True)
            if args.out:
                os.makedirs(args.out, exist_ok=True)
                name = f"{args.task}-{run.replace(':', '_').replace('=', '-')}" + \
                    (f"-s{args.seed}" if args.seed != 1 else "") + ".json"
                with open(os.path.join(args.out, name), "w") as f:
                    json.dump(res, f)
        dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", choices=sorted(tasks.TASKS), required=True)
    ap.add_argument("--runs", default="dense,topk:0.01,topk:0.001")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--port", type=int, default=29711)
    ap.add_argument("--seed", type=int, default=1, help="the task's weights and data")
    ap.add_argument("--box", action="store_true", help="a real box (pbox.Client())")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.world > 4:
        sys.exit("at most 4 ranks on this machine")
    mp.spawn(worker, args=(args,), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
