#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""torch_backend_check.py - the "pbox" torch.distributed backend against the
real pboxd, run by torchrun (test_torch_backend.sh); every rank checks, and
rank 0 prints one "backend: N passed, 0 failed" line.

--part coll: every collective the box runs, in f32, f16 and bf16, against
  a reference each rank computes itself (every rank's inputs come from
  seeds): broadcast and allgather bit for bit (-0, NaN payloads, denormals
  included), allreduce/reduce/reduce_scatter as the rank-ordered binary32
  sum rounded once (AVG: that sum divided by the world), barrier; the ops
  that go to the inner Gloo group (MAX, int64, all_to_all, gather,
  scatter, send/recv) give Gloo's answers; counters say which ran where;
  torch.profiler shows a pbox::allreduce span; then the edges (part_edges:
  empty all-gathers, a non-contiguous output on one rank only, AVG on the
  reduce-scatter's Gloo fallback, refused overlapping outputs and sparse
  counts). Run lossless and under loss.
--part train: DDP with init_process_group("pbox") and no hook (conv,
  embedding, layernorm, an unused parameter, no_sync accumulation) against
  the same model under DDP on a Gloo group in the same processes; and a
  sharded (ZeRO-3 / FSDP-style) SGD that reduce-scatters the flat
  gradient and all-gathers the flat parameters, against the same. Then
  job memory: a small job's group releasing its least recently used keys,
  a failed call raising, a hook State releasing an old bucket layout.
"""
import argparse
import faulthandler
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import pbox.torch  # noqa: F401  (registers the backend)

fails = []
passes = 0


def check(cond, what):
    global passes
    if cond:
        passes += 1
    else:
        fails.append(what)
        print(f"rank {dist.get_rank()}: FAIL {what}", flush=True)


DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def data(rank, step, n, dtype, special=True):
    """Rank rank's data (deterministic), with -0, a NaN with a payload and
    a denormal in it when special."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    t = (torch.randn(n, generator=g) * 100).to(dtype)
    if special and n > 8:
        bits = t.view(torch.int32 if dtype == torch.float32 else torch.int16)
        if dtype == torch.float32:
            bits[1], bits[2], bits[3] = -2 ** 31, 0x7FC01234, 1
        else:
            bits[1] = -2 ** 15
            bits[2] = 0x7E55 if dtype == torch.float16 else 0x7FC3
            bits[3] = 1
    return t


def same_bits(a, b):
    view = torch.int32 if a.dtype == torch.float32 else torch.int16
    return torch.equal(a.contiguous().view(view), b.contiguous().view(view))


def ordered_sum(parts, dtype, avg=False):
    """The box's sum: binary32 in rank order, rounded once to dtype."""
    acc = parts[0].float().clone()
    for p in parts[1:]:
        acc = acc + p.float()
    out = acc.to(dtype)
    if avg:
        out = out / len(parts)   # the backend divides the rounded sum, in dtype
    return out


def host_local():
    """Ranks per host when the default group sums through libpbox's host
    level (torchrun's LOCAL_WORLD_SIZE above 1, PBOX_HOST_LOCAL not off),
    else 1."""
    L = int(os.environ.get("LOCAL_WORLD_SIZE") or 1)
    off = os.environ.get("PBOX_HOST_LOCAL", "on") in ("0", "off")
    return 1 if off or L < 2 else L


def allreduce_sum(parts, dtype, avg=False):
    """What an allreduce of the default group returns: ordered_sum, or with
    the host level each host's sum in local rank order rounded to dtype,
    then the hosts' in host order (docs/protocol.md "Host-local
    aggregation: the order")."""
    L, world = host_local(), len(parts)
    if L > 1:
        parts = [ordered_sum(parts[h:h + L], dtype) for h in range(0, world, L)]
    out = ordered_sum(parts, dtype)
    return out / world if avg else out   # (as ordered_sum's avg, over the world)


def part_coll(steps):
    rank, world = dist.get_rank(), dist.get_world_size()
    pg = dist.distributed_c10d._get_default_group()
    check(pg.getBackendName() == "pbox", f"backend name {pg.getBackendName()}")
    check("PBOX_JOB" not in os.environ and pg.job.startswith("pg-"), f"job {pg.job} from the store")
    if rank == 0:
        print(f"job '{pg.job}' from the c10d store", flush=True)
    n = 1000   # not a multiple of any segment: short last segments everywhere
    for step in range(steps):
        for dt in DTYPES:
            tag = f"step {step} {dt}"
            # broadcast from each root in turn (a key per root)
            root = step % world
            t = data(rank, step, 3 * n + 1, dt) if rank == root else torch.full((3 * n + 1,), 7.0, dtype=dt)
            dist.broadcast(t, root)
            check(same_bits(t, data(root, step, 3 * n + 1, dt)), f"{tag}: broadcast from {root}")
            # all_gather into a list, and into one tensor
            mine = data(rank, step, n, dt)
            outs = [torch.empty(n, dtype=dt) for _ in range(world)]
            dist.all_gather(outs, mine)
            check(all(same_bits(outs[i], data(i, step, n, dt)) for i in range(world)),
                  f"{tag}: all_gather")
            flat = torch.empty(world * n, dtype=dt)
            dist.all_gather_into_tensor(flat, mine) if hasattr(dist, "all_gather_into_tensor") \
                else dist._all_gather_base(flat, mine)
            check(same_bits(flat, torch.cat([data(i, step, n, dt) for i in range(world)])),
                  f"{tag}: all_gather_into_tensor")
            # sums: finite inputs
            parts = [data(i, step, world * n, dt, special=False) for i in range(world)]
            t = parts[rank].clone()
            dist.all_reduce(t)
            check(same_bits(t, allreduce_sum(parts, dt)), f"{tag}: all_reduce SUM")
            t = parts[rank].clone()
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            check(same_bits(t, allreduce_sum(parts, dt, avg=True)), f"{tag}: all_reduce AVG")
            t = parts[rank].clone()
            dist.reduce(t, dst=(step + 1) % world)
            want = allreduce_sum(parts, dt) if rank == (step + 1) % world else parts[rank]
            check(same_bits(t, want), f"{tag}: reduce (root's sum, others untouched)")
            out = torch.empty(n, dtype=dt)
            dist.reduce_scatter(out, list(parts[rank].split(n)))
            check(same_bits(out, ordered_sum(parts, dt)[rank * n:(rank + 1) * n]),
                  f"{tag}: reduce_scatter")
            out = torch.empty(n, dtype=dt)
            rs = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
            rs(out, parts[rank].clone(), op=dist.ReduceOp.AVG)
            check(same_bits(out, ordered_sum(parts, dt, avg=True)[rank * n:(rank + 1) * n]),
                  f"{tag}: reduce_scatter_tensor AVG")
            dist.barrier()
    box = pg.calls["box"]
    # what the box does not do goes to Gloo, with Gloo's answers
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    check(t.item() == world - 1, "all_reduce MAX (Gloo)")
    t = torch.tensor([rank + 1], dtype=torch.int64)
    dist.all_reduce(t)
    check(t.item() == world * (world + 1) // 2, "int64 all_reduce (Gloo)")
    src = torch.arange(world, dtype=torch.float32) + 10 * rank
    dst = torch.empty(world)
    dist.all_to_all_single(dst, src)
    check(torch.equal(dst, torch.arange(world, dtype=torch.float32) * 10 + rank),
          "all_to_all_single (Gloo)")
    g = [torch.empty(1) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.tensor([float(rank)]), g, dst=0)
    check(rank != 0 or [x.item() for x in g] == list(range(world)), "gather (Gloo)")
    if rank == 0:
        dist.send(torch.tensor([42.0]), 1)
    elif rank == 1:
        r = torch.empty(1)
        dist.recv(r, 0)
        check(r.item() == 42.0, "send/recv (Gloo)")
    check(pg.calls["box"] == box and pg.calls["gloo"] >= 4 + (rank < 2),
          f"Gloo ops did not touch the box ({pg.calls})")
    check(box >= steps * len(DTYPES) * 9, f"box ops counted ({pg.calls})")
    # one span per collective in torch.profiler
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t = torch.ones(10)
        dist.all_reduce(t)
    names = {e.name for e in prof.events()}
    check("pbox::allreduce" in names, "torch.profiler shows pbox::allreduce")
    st = pg.client.stats()
    if rank == 0:
        print(f"rank 0: {pg.calls['box']} box calls, {pg.calls['gloo']} Gloo calls, "
              f"{st['retransmits']} retransmits, {st['nacks']} NACKs", flush=True)
    # async work and its future
    t = torch.ones(4096)
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    check(torch.equal(t, torch.full((4096,), float(world))), "async all_reduce")
    part_edges()
    part_bf16()


def refused(fn, *words):
    """fn() raises a pbox EINVAL naming words, at once (None if it did)."""
    try:
        fn()
    except pbox.Error as e:
        if e.code == pbox.EINVAL and all(w in e.message for w in words):
            return None
        return f"{e.name}: {e.message}"
    return "nothing raised"


def part_edges():
    """Calls at the edges, each ending with the group still working:
    empty all-gathers (torch 1.13's Gloo divides by zero on them), a
    non-contiguous output on some ranks only (every rank must still take
    the same path: the box), AVG on the Gloo fallbacks of reduce_scatter,
    all_reduce and reduce (float64), an overlapping (expand()ed) output and a sparse tensor with
    more values than indices (refused at once with EINVAL)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    pg = dist.distributed_c10d._get_default_group()
    ag = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
    rs = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
    calls = dict(pg.calls)
    outs = [torch.zeros(0) for _ in range(world)]
    dist.all_gather(outs, torch.zeros(0))
    ag(torch.zeros(0), torch.zeros(0))
    ag(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64))
    check(pg.calls == calls, f"empty all-gathers complete without the box or Gloo ({pg.calls})")
    # rank 1's outputs are column views, the others' contiguous
    x = torch.tensor([1.0, 2.0]) + 10 * rank
    want = torch.cat([torch.tensor([1.0, 2.0]) + 10 * r for r in range(world)])
    base = torch.zeros(2 * world, 2)
    out = base[:, 1] if rank == 1 else torch.zeros(2 * world)
    box = pg.calls["box"]
    ag(out, x)
    check(torch.equal(out, want) and not base[:, 0].any(),
          f"all_gather_into_tensor, a non-contiguous output on rank 1: {out.tolist()}")
    base = torch.zeros(3, 2)
    out = base[:, 0] if rank == 1 else torch.zeros(3)
    rs(out, torch.arange(3.0 * world) * (rank + 1), op=dist.ReduceOp.AVG)
    mean = (world + 1) / 2
    check(torch.equal(out, (torch.arange(3.0) + 3 * rank) * mean) and not base[:, 1].any(),
          f"reduce_scatter_tensor AVG, a non-contiguous output on rank 1: {out.tolist()}")
    check(pg.calls["box"] == box + 2, f"both ran on the box on every rank ({pg.calls})")
    # AVG of float64 (the Gloo fallback), list and tensor forms
    ins = [torch.full((3,), float(rank + 1 + 10 * i), dtype=torch.float64) for i in range(world)]
    out = torch.zeros(3, dtype=torch.float64)
    dist.reduce_scatter(out, ins, op=dist.ReduceOp.AVG)
    check(torch.equal(out, torch.full((3,), mean + 10 * rank, dtype=torch.float64)),
          f"reduce_scatter AVG of float64 (Gloo): {out.tolist()}")
    out = torch.zeros(3, dtype=torch.float64)
    rs(out, torch.cat(ins), op=dist.ReduceOp.AVG)
    check(torch.equal(out, torch.full((3,), mean + 10 * rank, dtype=torch.float64)),
          f"reduce_scatter_tensor AVG of float64 (Gloo): {out.tolist()}")
    err = refused(lambda: rs(torch.zeros(1, dtype=torch.int64),
                             torch.ones(world, dtype=torch.int64), op=dist.ReduceOp.AVG),
                  "AVG of torch.int64")
    check(err is None, f"reduce_scatter_tensor AVG of int64 refused ({err})")
    # all_reduce and reduce AVG of float64 (the Gloo fallback): SUM / world
    t = torch.full((3,), float(rank + 1), dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check(torch.equal(t, torch.full((3,), mean, dtype=torch.float64)),
          f"all_reduce AVG of float64 (Gloo): {t.tolist()}")
    t = torch.full((3,), float(rank + 1), dtype=torch.float64)
    w = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    w.wait()
    check(torch.equal(t, torch.full((3,), mean, dtype=torch.float64)),
          f"all_reduce AVG of float64 (Gloo), async: {t.tolist()}")
    t = torch.full((3,), float(rank + 1), dtype=torch.float64)
    dist.reduce(t, 0, op=dist.ReduceOp.AVG)
    check(rank != 0 or torch.equal(t, torch.full((3,), mean, dtype=torch.float64)),
          f"reduce AVG of float64 (Gloo) at the root: {t.tolist()}")
    err = refused(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int64),
                                          op=dist.ReduceOp.AVG), "AVG of torch.int64")
    check(err is None, f"all_reduce AVG of int64 refused ({err})")
    # an output whose elements overlap: refused, the group goes on
    e = torch.ones(1).expand(4)
    err = refused(lambda: dist.all_reduce(e), "all_reduce", "overlapping")
    check(err is None, f"all_reduce of an expand()ed tensor refused ({err})")
    err = refused(lambda: ag(torch.zeros(1).expand(world), torch.ones(1)), "overlapping")
    check(err is None, f"all_gather_into_tensor into an expand()ed tensor refused ({err})")
    t = torch.ones(4)
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((4,), float(world))), "the group works after refusals")
    # a sparse tensor's indices and values must pair up (refused before the box)
    err = refused(lambda: pbox.torch.sparse_allreduce(([4, 1, 7], [1., 2., 3., 4., 5.], 8),
                                                      pg.client, 2 ** 31 + 5),
                  "3 indices but 5 values")
    check(err is None, f"sparse_allreduce of 3 indices and 5 values refused ({err})")


def part_bf16():
    """bfloat16 on the Gloo fallbacks, which torch 1.13's Gloo has no type
    for ("Invalid scalar type"): reductions other than SUM/AVG run in
    float32 and round once (MAX and MIN exact), data movement (gather,
    scatter, all-to-all) moves the bytes."""
    rank, world = dist.get_rank(), dist.get_world_size()
    bf = torch.bfloat16
    vals = [torch.tensor([1.5, -2.0, 3.25], dtype=bf) * (r + 1) for r in range(world)]
    t = vals[rank].clone()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    check(torch.equal(t, torch.stack(vals).max(0).values), f"bf16 all_reduce MAX: {t}")
    t = vals[rank].clone()
    w = dist.all_reduce(t, op=dist.ReduceOp.MIN, async_op=True)
    w.wait()
    check(torch.equal(t, torch.stack(vals).min(0).values), f"bf16 all_reduce MIN async: {t}")
    t = torch.full((2,), float(rank + 1), dtype=bf)
    dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
    prod = float(torch.arange(1, world + 1).prod())
    check(torch.equal(t, torch.full((2,), prod, dtype=bf)), f"bf16 all_reduce PRODUCT: {t}")
    t = vals[rank].clone()
    dist.reduce(t, 0, op=dist.ReduceOp.MAX)
    check(rank != 0 or torch.equal(t, torch.stack(vals).max(0).values),
          f"bf16 reduce MAX at the root: {t}")
    out = torch.zeros(3, dtype=bf)
    dist.reduce_scatter(out, [v.clone() * (rank + 1) for v in vals], op=dist.ReduceOp.MAX)
    want = torch.stack([vals[rank] * (k + 1) for k in range(world)]).max(0).values
    check(torch.equal(out, want), f"bf16 reduce_scatter MAX: {out}")
    g = [torch.zeros(3, dtype=bf) for _ in range(world)] if rank == 0 else None
    dist.gather(vals[rank], g, dst=0)
    check(rank != 0 or all(torch.equal(g[r], vals[r]) for r in range(world)),
          f"bf16 gather: {g}")
    s = torch.zeros(3, dtype=bf)
    dist.scatter(s, [v.clone() for v in vals] if rank == 0 else None, src=0)
    check(torch.equal(s, vals[rank]), f"bf16 scatter: {s}")
    src = (torch.arange(world, dtype=torch.float32) + 10 * rank).to(bf)
    dst = torch.zeros(world, dtype=bf)
    dist.all_to_all_single(dst, src)
    check(torch.equal(dst, (torch.arange(world, dtype=torch.float32) * 10 + rank).to(bf)),
          f"bf16 all_to_all_single: {dst}")
    outs = [torch.zeros(1, dtype=bf) for _ in range(world)]
    dist.all_to_all(outs, [torch.tensor([float(10 * rank + r)], dtype=bf) for r in range(world)])
    check([o.item() for o in outs] == [float(10 * r + rank) for r in range(world)],
          f"bf16 all_to_all: {outs}")
    t = torch.ones(4, dtype=bf)
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((4,), float(world), dtype=bf)), "the box after bf16 Gloo")


class Net(nn.Module):
    """conv + embedding + layernorm, and a parameter forward() never uses."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 8)
        self.conv = nn.Conv1d(8, 16, 3, padding=1)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 5)
        self.spare = nn.Linear(16, 5)   # unused: find_unused_parameters

    def forward(self, idx):
        x = self.emb(idx).transpose(1, 2)          # B, 8, L
        x = torch.relu(self.conv(x)).mean(dim=2)   # B, 16
        return self.head(self.norm(x))


def batch(step, micro, rank):
    g = torch.Generator().manual_seed(step * 1009 + micro * 101 + rank)
    idx = torch.randint(0, 50, (16, 12), generator=g)
    y = (idx.sum(dim=1) % 5)
    return idx, y


def train_ddp(group, steps, accum):
    torch.manual_seed(3)
    model = Net()
    ddp = DDP(model, process_group=group, find_unused_parameters=True,
              bucket_cap_mb=4 / 1024)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    rank = dist.get_rank()
    for step in range(steps):
        opt.zero_grad(set_to_none=False)
        for m in range(accum):
            idx, y = batch(step, m, rank)
            if m < accum - 1:
                with ddp.no_sync():
                    (F.cross_entropy(ddp(idx), y) / accum).backward()
            else:
                (F.cross_entropy(ddp(idx), y) / accum).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def train_sharded(steps):
    """ZeRO-3 / FSDP's pattern by hand: flat parameters sharded over the
    ranks; per step all_gather_into_tensor the parameters, backward,
    reduce_scatter_tensor(AVG) the flat gradient, SGD on the own shard."""
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(3)
    model = Net()
    params = list(model.parameters())
    numel = sum(p.numel() for p in params)
    per = -(-numel // world)
    flat = torch.zeros(per * world)
    flat[:numel] = torch.cat([p.detach().reshape(-1) for p in params])
    shard = flat[rank * per:(rank + 1) * per].clone()
    buf = torch.zeros(per)   # momentum of the shard
    rs = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
    ag = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
    for step in range(steps):
        full = torch.empty(per * world)
        ag(full, shard)
        off = 0
        for p in params:
            p.data.copy_(full[off:off + p.numel()].view_as(p))
            p.grad = None
            off += p.numel()
        idx, y = batch(step, 0, rank)
        F.cross_entropy(model(idx), y).backward()
        g = torch.zeros(per * world)
        g[:numel] = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                               for p in params])
        gs = torch.empty(per)
        rs(gs, g, op=dist.ReduceOp.AVG)
        buf.mul_(0.9).add_(gs)
        shard.add_(buf, alpha=-0.05)
    full = torch.empty(per * world)
    ag(full, shard)
    return full[:numel]


def part_train(steps):
    gloo = dist.new_group(backend="gloo")
    ref = train_ddp(gloo, steps, accum=2)
    got = train_ddp(None, steps, accum=2)    # the default group: pbox, no hook
    diff = (got - ref).abs().max().item()
    check(diff <= 1e-5, f"DDP on pbox within 1e-5 of DDP on Gloo ({diff:.2e})")
    if dist.get_rank() == 0:
        print(f"DDP: pbox vs Gloo max |diff| {diff:.2e} after {steps} steps", flush=True)
    # every rank holds the same bits
    digests = [None] * dist.get_world_size()
    dist.all_gather_object(digests, got.numpy().tobytes().hex()[:64] + str(got.sum().item()))
    check(len(set(digests)) == 1, "DDP on pbox: ranks identical")
    ref1 = train_ddp(gloo, steps, accum=1)
    sh = train_sharded(steps)
    diff = (sh - ref1).abs().max().item()
    check(diff <= 1e-5, f"sharded (reduce_scatter + all_gather) within 1e-5 of DDP ({diff:.2e})")
    if dist.get_rank() == 0:
        print(f"sharded: pbox vs DDP on Gloo max |diff| {diff:.2e}", flush=True)
    print(f"rank {dist.get_rank()}: DDP and sharded runs agree", flush=True)
    part_memory()


def part_memory():
    """Key release (docs/rpc.md "key_release"): a pbox group whose job holds
    keys for about 300 kB runs allreduces of twelve shapes (~1 MB of keys in
    all) exactly, releasing its least recently used keys on the way; a hook
    State releases the first bucket layout's keys when the layout changes."""
    rank, world = dist.get_rank(), dist.get_world_size()
    want = float(world * (world + 1) // 2)
    pbox.torch.set_backend_options(key_bytes=300_000)
    g = dist.new_group(backend="pbox")
    pbox.torch.set_backend_options(key_bytes=0)
    check(g.client.stats()["key_bytes"] >= 300_000, "the job was sized by key_bytes")
    for i in range(12):
        t = torch.full((20000 + 1000 * i,), float(rank + 1))
        dist.all_reduce(t, group=g)
        check(torch.equal(t, torch.full_like(t, want)), f"allreduce {i} in a small job")
    check(g.released > 0, f"least recently used keys released ({g.released})")
    if rank == 0:
        print(f"memory: {g.released} keys released by the small job's group", flush=True)
    # a call the box refuses is never a silent success (no room for it):
    # its future raises, its tensor is NaN (torch 1.13's Work.wait() cannot
    # raise), and the group's next call raises the box's message
    pbox.torch.set_backend_options(key_bytes=4096)
    tiny = dist.new_group(backend="pbox")
    pbox.torch.set_backend_options(key_bytes=0)
    t = torch.ones(100000)
    w = dist.all_reduce(t, group=tiny, async_op=True)
    try:
        w.get_future().wait()
        check(False, "the future of an allreduce beyond the job's memory raises")
    except Exception as e:   # noqa: BLE001 (the box's ENOSPC, as pbox.Error text)
        check("job memory" in str(e), f"its future raises the box's reason ({e})")
    check(bool(torch.isnan(t).all()), "the failed allreduce's tensor is NaN")
    try:
        dist.all_reduce(torch.ones(10), group=tiny)
        check(False, "the next call on a failed group raises")
    except Exception as e:   # noqa: BLE001
        check("job memory" in str(e), f"the next call on the failed group raises ({e})")
    # a hook State: bucket layout A for one iteration, then layout B
    c = pbox.Client(os.environ["PBOX_CONTROL"], g.job + "-hook", rank, world,
                    key_bytes=pbox.torch.key_bytes_for(nn.Linear(300, 100)))
    st = pbox.torch.State(c, name="mem")
    layouts = [[(0, 20000), (1, 10000)], [(0, 20000), (1, 10000)], [(0, 15000), (1, 15000)],
               [(0, 15000), (1, 15000)]]
    for it, layout in enumerate(layouts):
        futs = []
        for i, (idx, n) in enumerate(layout):
            buf = torch.full((n,), float(rank + 1))
            key = st.key(idx, n, buf.dtype, last=i == len(layout) - 1)
            futs.append((buf, st.submit(buf, key, lambda b=buf: b)))
        for buf, f in futs:
            f.wait()
            check(torch.equal(buf, torch.full_like(buf, want)), f"hook iteration {it}")
    # layout B's first new bucket released layout A's two keys (bucket 0
    # of A had another size, so nothing of A was in use then)
    check(st.released == 2, f"the first layout's keys released ({st.released})")
    check(len(st.keys) == 2, f"the State keeps one layout ({len(st.keys)} keys)")
    st.close()
    c.close()


def main():
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["coll", "train"], required=True)
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("pbox")
    if args.part == "coll":
        part_coll(args.steps)
    else:
        part_train(args.steps)
    dist.barrier()
    ok = torch.tensor([float(len(fails))])
    dist.all_reduce(ok, op=dist.ReduceOp.MAX)
    if dist.get_rank() == 0:
        print(f"backend {args.part}: {passes} passed, {int(ok.item())} failed (worst rank)",
              flush=True)
    dist.destroy_process_group()
    return 1 if fails or ok.item() else 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # every check has run and printed: skip the interpreter's teardown, where
    # torch 1.13's threads have been seen to abort ("terminate called without
    # an active exception") once every few runs
    os._exit(rc)
