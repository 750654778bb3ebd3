#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""py_lifecycle_check.py - the Python package's request and process-group
lifetimes and the pbox backend's key budget, against a real pboxd
(test_py_lifecycle.sh runs it in the workers' namespace with PBOX_CONTROL,
PBOX_SOCKET and PBOXCTL set).

--part wait: two clients (ranks 0 and 1 of one job, in threads); 3000
  requests, each waited for by four threads at once: every waiter gets the
  sum or EBUSY (another thread is inside), never ECLOSED, and a wait()
  afterwards returns the sum; requests close() abandoned raise ECLOSED.
--part groups: two processes, init_process_group("pbox") and
  destroy_process_group() three times: after each destroy the group's
  client is closed, its waiter thread gone, and the box lists no job of it.
--part ddp: two processes, DDP with no hook on the backend in a job sized
  set_backend_options(key_bytes=key_bytes_for(model)), for a model of four
  equal buckets and one of buckets of different sizes: from the third
  iteration on no key is released. Prints keys released and the mean step.

Prints "lifecycle PART: N passed, 0 failed" (exit 1 on a failure).
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import threading
import time

import torch

import pbox

failures = []
passed = [0]


def check(ok, what):
    if ok:
        passed[0] += 1
    else:
        failures.append(what)
        print(f"FAIL {what}", flush=True)


def part_wait(n=3000):
    sys.setswitchinterval(1e-6)      # many switches: the waiters interleave
    job = f"pylife-wait-{os.getpid()}"
    peer_err = []

    def peer():
        try:
            c = pbox.Client(job=job, rank=1, world=2)
            t = torch.ones(16)
            for i in range(n):
                c.allreduce(t, key=i % 4)
            r = c.iallreduce(t, key=9)     # abandoned
            c.close()
            try:
                r.wait()
                peer_err.append("an abandoned request's wait() returned")
            except pbox.Error as e:
                if e.code != pbox.ECLOSED:
                    peer_err.append(f"an abandoned request's wait(): {e}")
        except Exception as e:  # noqa: BLE001 (reported below)
            peer_err.append(repr(e))

    th = threading.Thread(target=peer)
    th.start()
    c = pbox.Client(job=job, rank=0, world=2)
    t = torch.ones(16)
    counts = collections.Counter()
    bad = []
    for i in range(n):
        r = c.iallreduce(t, key=i % 4)
        res = [None] * 4

        def w(j):
            try:
                r.wait()
                res[j] = "ok"
            except pbox.Error as e:
                res[j] = e.name

        ws = [threading.Thread(target=w, args=(j,)) for j in range(4)]
        for x in ws:
            x.start()
        for x in ws:
            x.join()
        counts.update(res)
        try:
            r.wait()
        except pbox.Error as e:
            bad.append(f"request {i}: wait() afterwards raised {e}")
        if "ECLOSED" in res:
            bad.append(f"request {i}: waiters got {res}")
    sys.setswitchinterval(0.005)
    r = c.iallreduce(t, key=9)       # abandoned
    c.close()
    th.join(60)
    check(not bad, f"no ECLOSED on an open client ({len(bad)} requests: {bad[:3]})")
    check(counts["ok"] >= n and set(counts) <= {"ok", "EBUSY"},
          f"every waiter got the sum or EBUSY ({dict(counts)})")
    try:
        r.wait()
        check(False, "an abandoned request raises ECLOSED")
    except pbox.Error as e:
        check(e.code == pbox.ECLOSED, f"an abandoned request raises ECLOSED ({e})")
    check(not peer_err, f"the peer rank: {peer_err}")
    print(f"wait: {n} requests x 4 waiters: {dict(counts)}", flush=True)


def _jobs():
    out = subprocess.run([os.environ["PBOXCTL"], "--json", "jobs"], capture_output=True,
                         text=True, timeout=20).stdout
    return {j["job"]: j for j in json.loads(out)["jobs"]}


def _groups_rank(rank, port, barrier, q):
    import torch.distributed as dist
    import pbox.torch  # noqa: F401 (registers "pbox")
    try:
        for i in range(3):
            dist.init_process_group("pbox", init_method=f"tcp://127.0.0.1:{port + i}",
                                    rank=rank, world_size=2)
            pg = dist.distributed_c10d._get_default_group()
            client, job = pg.client, pg.job
            del pg
            t = torch.ones(4) * (rank + 1)
            dist.all_reduce(t)
            if t.tolist() != [3.0] * 4:
                q.put(f"rank {rank} cycle {i}: allreduce gave {t.tolist()}")
            dist.destroy_process_group()
            waiters = [th for th in threading.enumerate() if th.name == "pbox-pg-waiter"]
            if not client.closed or waiters:
                q.put(f"rank {rank} cycle {i}: after destroy_process_group() the client is "
                      f"{'closed' if client.closed else 'open'}, {len(waiters)} waiter threads")
            barrier.wait(60)
            if rank == 0:
                end = time.monotonic() + 10
                while job in _jobs() and time.monotonic() < end:
                    time.sleep(0.1)
                if job in _jobs():
                    q.put(f"cycle {i}: the box still lists job {job}: {_jobs()[job]}")
            barrier.wait(60)
    except Exception as e:  # noqa: BLE001 (reported by the parent)
        q.put(f"rank {rank}: {type(e).__name__}: {e}")


def _spawn(fn, *args):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=fn, args=(r, *args, q)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        if p.is_alive():
            p.kill()
            p.join()
            q.put(f"pid {p.pid} did not end in 180 s")
    msgs = []
    while not q.empty():
        msgs.append(q.get())
    return msgs, [p.exitcode for p in procs]


def part_groups():
    import torch.multiprocessing as mp
    barrier = mp.get_context("spawn").Barrier(2)
    msgs, codes = _spawn(_groups_rank, 29750, barrier)
    errs = [m for m in msgs if not m.startswith("ok")]
    check(not errs and codes == [0, 0], f"groups: {errs} exit codes {codes}")
    print("groups: 3 init/destroy cycles, clients closed, no waiter threads, no jobs left"
          if not errs else f"groups: {errs}", flush=True)


MODELS = {
    "equal": (lambda nn: nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(4)]), 1024, 4),
    "mixed": (lambda nn: nn.Sequential(nn.Linear(1024, 1024), nn.Linear(1024, 768),
                                       nn.Linear(768, 512), nn.Linear(512, 1024)), 1024, 4),
}


def _ddp_rank(rank, name, port, q, iters=10):
    import torch.distributed as dist
    import torch.nn as nn
    import pbox.torch
    try:
        torch.manual_seed(0)
        make, width, cap = MODELS[name]
        model = make(nn)
        pbox.torch.set_backend_options(key_bytes=pbox.torch.key_bytes_for(model))
        dist.init_process_group("pbox", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=2)
        pg = dist.distributed_c10d._get_default_group()
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        released, steps = [], []
        for _ in range(iters):
            t0 = time.monotonic()
            opt.zero_grad()
            ddp(torch.randn(8, width)).pow(2).mean().backward()
            opt.step()
            steps.append(time.monotonic() - t0)
            released.append(pg.released)
        later = released[-1] - released[1]
        if rank == 0:
            q.put(f"ok ddp {name}: {released[1]} keys released in iterations 1-2, {later} in "
                  f"3-{iters} ({later / (iters - 2):.1f} per iteration), mean step "
                  f"{sum(steps[2:]) / (iters - 2):.3f} s, keys held {pg._held} of budget "
                  f"{pg._budget}")
        if later:
            q.put(f"rank {rank} {name}: keys released after iteration 2: {released}")
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 (reported by the parent)
        q.put(f"rank {rank}: {type(e).__name__}: {e}")


def part_ddp():
    for i, name in enumerate(MODELS):
        msgs, codes = _spawn(_ddp_rank, name, 29760 + i)
        errs = [m for m in msgs if not m.startswith("ok")]
        for m in msgs:
            if m.startswith("ok"):
                print(m[3:], flush=True)
        check(not errs and codes == [0, 0], f"ddp {name}: {errs} exit codes {codes}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["wait", "groups", "ddp"], required=True)
    a = ap.parse_args()
    {"wait": part_wait, "groups": part_groups, "ddp": part_ddp}[a.part]()
    print(f"lifecycle {a.part}: {passed[0]} passed, {len(failures)} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
