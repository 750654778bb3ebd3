#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""box_optimizer_check.py - the Python side of test_box_optimizer.sh:
pbox.torch.BoxOptimizer against torch.optim on the same gradients.

    box_optimizer_check.py rank OUT        one rank (RANK, WORLD_SIZE,
                                           PBOX_CONTROL, PBOX_JOB from the
                                           environment) trains every CASE
    box_optimizer_check.py reference OUT   one process, torch.optim: the same
                                           cases on the mean of the ranks'
                                           gradients, no box
    box_optimizer_check.py compare REF RUN_DIR [RUN_DIR...]
                                           check the runs against the
                                           reference and each other
    box_optimizer_check.py bad CONTROL     wrong inputs, world 1: named errors

The model: a 2-layer MLP body (32-64-32, tanh) in one param group and a
linear head (32-10) in a second with another lr: 4522 parameters; small
buckets (bucket_mb=0.004) cut them into 5 PS keys per case. Every rank
starts from its own random init (seed 100 + rank), so the first thing
checked is that BoxOptimizer gave every rank rank 0's weights. At step 40
each rank resumes as from a checkpoint (resume(): a new model and
BoxOptimizer loaded from the old ones' state_dicts), which the comparison
can only survive if the state went through the box and back intact. The batch of
(case, step, rank) comes from its own seeded generator, so the reference
computes exactly the gradients each rank computes from the same weights.

Reference: per step, each rank's gradient on the reference weights, summed
in rank order in fp32 and divided by the world (what the box does), then
torch.optim.SGD/Adam/AdamW with the same hyperparameters and lr schedule.
Tolerances (compare), after 50 steps, for every parameter tensor: (1)
max |box - ref| <= RTOL * max |ref| (1e-5 relative to the tensor's scale),
and (2) element-wise |box - ref| <= ATOL + RTOL * |ref| (torch.allclose)
with RTOL = 1e-5 and ATOL = 1e-6; the same for the optimizer state read
back from the box (momentum buffers; exp_avg, exp_avg_sq). Why: the box runs torch 1.13's
update formulas in fp32 in the same order, but torch's vectorised CPU
kernels fuse some multiply-adds (weight decay, momentum, addcdiv) that the
box rounds twice, so single steps differ by an ulp or so, and the lr goes
to the box as float32 while torch computes Adam's step size in double;
these differences then feed back through 50 steps of training (the weights
change the gradients). RTOL 1e-5 is about 80 ulps of a float32; ATOL 1e-6
covers elements near zero (weights are O(0.1)), where a relative error
means nothing. Ranks, on the other hand, must hold bit-identical weights,
and a run under packet loss must end with exactly the bits of the
lossless run: the box applies each step once, whatever was retransmitted.
"""
import hashlib
import os
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))    # tests/python: checks.py

import pbox            # noqa: E402  (after the path is set)
import pbox.torch      # noqa: E402
from checks import check, check_eq, check_le, check_raises  # noqa: E402

IN, HID, OUT = 32, 64, 10
WORLD = 4
STEPS = int(os.environ.get("STEPS", "50"))
SAVE_AT = 40                       # resumed from a state_dict before this step
BATCH = 16
BUCKET_MB = 0.004                  # ~1000 floats: several keys per group
RTOL, ATOL = 1e-5, 1e-6


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN, HID)
        self.fc2 = nn.Linear(HID, 32)
        self.head = nn.Linear(32, OUT)

    def forward(self, x):
        return self.head(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))

    def groups(self, lr_body, lr_head):
        body = list(self.fc1.parameters()) + list(self.fc2.parameters())
        return [{"params": body, "lr": lr_body},
                {"params": list(self.head.parameters()), "lr": lr_head}]


def _warmup_decay(s):
    return min(1.0, (s + 1) / 5) * 0.95 ** s


# name -> (optimizer, lr body, lr head, hyperparameters, schedule, data seed, overlap)
CASES = {
    "sgd": ("sgd", 0.1, 0.05, dict(momentum=0.9, nesterov=True, weight_decay=1e-4),
            lambda o: torch.optim.lr_scheduler.LambdaLR(o, _warmup_decay), 1, False),
    "adam": ("adam", 1e-2, 3e-3, dict(betas=(0.9, 0.99), eps=1e-7, weight_decay=1e-4),
             lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=15, gamma=0.5), 2, False),
    "adamw": ("adamw", 5e-3, 1e-2, dict(weight_decay=0.05),
              lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.97), 3, False),
    # the SGD case again with pushes started during backward: same bits as "sgd"
    "sgd-overlap": ("sgd", 0.1, 0.05, dict(momentum=0.9, nesterov=True, weight_decay=1e-4),
                    lambda o: torch.optim.lr_scheduler.LambdaLR(o, _warmup_decay), 1, True),
}
TORCH_OPT = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}


def batch(seed, step, rank):
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + rank)
    teacher = torch.Generator().manual_seed(seed)
    w = torch.randn(IN, OUT, generator=teacher)
    x = torch.randn(BATCH, IN, generator=g)
    y = (x @ w + 0.5 * torch.randn(BATCH, OUT, generator=g)).argmax(dim=1)
    return x, y


def params_of(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def digest(params):
    h = hashlib.sha256()
    for n in sorted(params):
        h.update(params[n].contiguous().numpy().tobytes())
    return h.hexdigest()


# ---- one rank -----------------------------------------------------------------

def run_case(client, name, rank):
    kind, lr_b, lr_h, hyper, sched_of, seed, overlap = CASES[name]
    torch.manual_seed(100 + rank)            # each rank its own init: the box's must win
    model = Net()
    opt = pbox.torch.BoxOptimizer(model.groups(lr_b, lr_h), kind, client, name=name,
                                  bucket_mb=BUCKET_MB, overlap=overlap, **hyper)
    init = params_of(model)
    sched = sched_of(opt)
    losses = []
    t0 = time.time()
    for step in range(STEPS):
        if step == SAVE_AT:
            model, opt, sched = resume(client, name, rank, model, opt, sched)
        opt.zero_grad(set_to_none=step % 2 == 0)
        x, y = batch(seed, step, rank)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    secs = time.time() - t0
    state = opt.state_dict()
    return {"init": init, "final": params_of(model), "losses": losses, "seconds": secs,
            "state": state["state"], "keys": opt.keys}


def resume(client, name, rank, model, opt, sched):
    """As a training script resumes from a checkpoint: a new model (its own
    random init) and a new BoxOptimizer (new keys, whose box starts from
    that init), then the saved model, optimizer and scheduler states
    loaded. Only a working state_dict/load_state_dict (weights, momentum or
    moments, step count) lets the run go on as if never stopped."""
    kind, lr_b, lr_h, hyper, sched_of, _, overlap = CASES[name]
    saved = (model.state_dict(), opt.state_dict(), sched.state_dict())   # collective
    torch.manual_seed(999 + rank)
    model = Net()
    opt = pbox.torch.BoxOptimizer(model.groups(lr_b, lr_h), kind, client, name=name + "-resumed",
                                  bucket_mb=BUCKET_MB, overlap=overlap, **hyper)
    sched = sched_of(opt)
    model.load_state_dict(saved[0])
    opt.load_state_dict(saved[1])                                        # collective
    sched.load_state_dict(saved[2])
    return model, opt, sched


def main_rank(out):
    torch.set_num_threads(1)
    client = pbox.Client()
    rank = client.rank
    res = {}
    for name in CASES:
        res[name] = run_case(client, name, rank)
        if rank == 0:
            r = res[name]
            print(f"{name}: {len(r['keys'])} keys, loss {r['losses'][0]:.4f} -> "
                  f"{r['losses'][-1]:.4f}, {STEPS} steps in {r['seconds']:.2f}s", flush=True)
    res["stats"] = client.stats()
    client.close()
    torch.save(res, out)
    return 0


# ---- the reference ----------------------------------------------------------------

def mean_grads(model, seed, step):
    """Each rank's gradient on model's weights, summed in rank order in
    fp32, divided by the world: what the box averages."""
    total = None
    for r in range(WORLD):
        model.zero_grad(set_to_none=True)
        x, y = batch(seed, step, r)
        F.cross_entropy(model(x), y).backward()
        g = [p.grad.detach().clone() for p in model.parameters()]
        total = g if total is None else [a.add_(b) for a, b in zip(total, g)]
    return [t / WORLD for t in total]


def main_reference(out):
    torch.set_num_threads(1)
    res = {}
    for name, (kind, lr_b, lr_h, hyper, sched_of, seed, _) in CASES.items():
        torch.manual_seed(100)               # rank 0's init
        model = Net()
        init = params_of(model)
        opt = TORCH_OPT[kind](model.groups(lr_b, lr_h), **hyper)
        sched = sched_of(opt)
        for step in range(STEPS):
            grads = mean_grads(model, seed, step)
            for p, g in zip(model.parameters(), grads):
                p.grad = g
            opt.step()
            sched.step()
        names = [n for n, _ in model.named_parameters()]
        state = {names.index(n): opt.state[p] for n, p in model.named_parameters()}
        res[name] = {"init": init, "final": params_of(model), "state": state}
    torch.save(res, out)
    return 0


# ---- compare --------------------------------------------------------------------

def close_err(a, b):
    """(max |a-b| / max |b|: the error relative to the tensor's scale,
    max of |a-b| / (ATOL + RTOL |b|): the element-wise test, <= 1 passes,
    max absolute error)."""
    d = (a.double() - b.double()).abs()
    scale = ATOL + RTOL * b.double().abs()
    rel = d.max().item() / max(b.double().abs().max().item(), 1e-30)
    return rel, (d / scale).max().item(), d.max().item()


def main_compare(ref_path, runs):
    ref = torch.load(ref_path)
    failures = []
    lossless = None
    for run in runs:
        ranks = [torch.load(os.path.join(run, f"rank{r}.pt")) for r in range(WORLD)]
        for name in CASES:
            rs = [x[name] for x in ranks]
            rf = ref[name]
            # every rank started from rank 0's weights, and ends with the same bits
            for r, x in enumerate(rs):
                if digest(x["init"]) != digest(rf["init"]):
                    failures.append(f"{run} {name}: rank {r} did not start from rank 0's weights")
            finals = {digest(x["final"]) for x in rs}
            if len(finals) != 1:
                failures.append(f"{run} {name}: ranks hold different weights "
                                f"({len(finals)} different digests)")
            rel, worst, ab = 0.0, 0.0, 0.0
            for n, want in rf["final"].items():
                r_, q, a_ = close_err(rs[0]["final"][n], want)
                rel, worst, ab = max(rel, r_), max(worst, q), max(ab, a_)
            srel, sw = 0.0, 0.0
            names = ["momentum_buffer"] if CASES[name][0] == "sgd" else ["exp_avg", "exp_avg_sq"]
            for i, st in rf["state"].items():
                got = rs[0]["state"].get(i)
                if got is None:
                    failures.append(f"{run} {name}: no box state for parameter {i}")
                    continue
                if "step" in st and int(got["step"].item()) != int(st["step"].item()):
                    failures.append(f"{run} {name}: parameter {i} step {got['step'].item()} on "
                                    f"the box, {st['step'].item()} in torch")
                for k in names:
                    r_, q, _ = close_err(got[k], st[k])
                    srel, sw = max(srel, r_), max(sw, q)
            print(f"{os.path.basename(run)} {name}: vs torch.optim: weights rel err {rel:.1e} "
                  f"(abs {ab:.1e}, allclose at {worst:.3f} of its tolerance), state rel err "
                  f"{srel:.1e} ({sw:.3f} of it); ranks identical: {len(finals) == 1}; "
                  f"loss {rs[0]['losses'][0]:.4f} -> {rs[0]['losses'][-1]:.4f}")
            for what, r_, q in (("weights", rel, worst), ("optimizer state", srel, sw)):
                if r_ > RTOL or q > 1:
                    failures.append(f"{run} {name}: {what} differ from torch.optim: {r_:.2e} "
                                    f"relative (at most {RTOL}), {q:.2f}x the allclose "
                                    f"tolerance (rtol {RTOL}, atol {ATOL})")
        if digest(ranks[0]["sgd"]["final"]) != digest(ranks[0]["sgd-overlap"]["final"]):
            failures.append(f"{run}: overlap=True ended with other weights than overlap=False")
        st = ranks[0]["stats"]
        print(f"{os.path.basename(run)}: rank 0 {st['calls']} calls, {st['pkts_sent']} packets "
              f"sent, {st['retransmits']} retransmitted")
        mine = {n: digest(ranks[0][n]["final"]) for n in CASES}
        if lossless is None:
            lossless = (run, mine)
        elif mine != lossless[1]:
            failures.append(f"{run}: weights differ from {lossless[0]}'s (bit for bit)")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


# ---- bad inputs, world 1 ------------------------------------------------------------

def expect(exc, words, fn, *args, **kw):
    """fn(*args, **kw) raises exc naming every one of words; returns it."""
    return check_raises(exc, fn, *args, words=words, **kw)


def main_bad(control):
    torch.set_num_threads(1)
    job = f"bad-{os.getpid()}"
    c = pbox.Client(control=control, job=job, rank=0, world=1)
    ps = pbox.torch.BoxOptimizer
    m = Net()
    n = 0

    def passed(what):
        nonlocal n
        n += 1
        print(f"  {what}")

    def fails(what, *a, **k):
        e = expect(*a, **k)
        passed(f"{what}: {type(e).__name__}: {e}")

    def construction():
        fails("unknown optimizer", ValueError, ["'rmsprop'", "sgd"], ps, m.parameters(), "rmsprop",
              c, lr=0.1)
        fails("momentum out of range", ValueError, ["momentum=1.5", "< 1"], ps, m.parameters(),
              "sgd", c, lr=0.1, momentum=1.5)
        fails("negative lr", ValueError, ["lr=-0.1"], ps, m.parameters(), "sgd", c, lr=-0.1)
        fails("beta out of range", ValueError, ["betas[1]=1.0"], ps, m.parameters(), "adam", c,
              betas=(0.9, 1.0))
        fails("eps 0", ValueError, ["eps=0"], ps, m.parameters(), "adam", c, eps=0)
        fails("nesterov without momentum", ValueError, ["Nesterov"], ps, m.parameters(), "sgd", c,
              lr=0.1, nesterov=True)
        fails("SGD without lr", ValueError, ["lr"], ps, m.parameters(), "sgd", c)
        fails("amsgrad", ValueError, ["amsgrad=True", "not supported"], ps, m.parameters(), "adam",
              c, amsgrad=True)
        fails("maximize", ValueError, ["maximize=True"], ps, m.parameters(), "sgd", c, lr=0.1,
              maximize=True)
        fails("unknown hyperparameter", TypeError, ["betas"], ps, m.parameters(), "sgd", c, lr=0.1,
              betas=(0.9, 0.9))

    def binding():
        # the binding itself: names checked here, values by the box
        K = 0x90000000
        fails("binding: unknown optimizer", pbox.Error, ["rmsprop", "EINVAL"],
              c.declare_optimizer, K, 16, "f32", "rmsprop")
        fails("binding: box refuses momentum", pbox.Error, ["momentum 1.5 is out of range",
              "EREJECTED"], c.declare_optimizer, K + 1, 16, "f32", "sgd", lr=0.1, momentum=1.5)
        fails("binding: box refuses eps", pbox.Error, ["eps -1 is out of range"],
              c.declare_optimizer, K + 2, 16, "f32", "adam", eps=-1)
        c.declare_optimizer(K + 3, 16, "f32", "sgd", lr=0.1)
        g, w = torch.ones(16), torch.zeros(16)
        fails("binding: push before ps_init", pbox.Error, ["push before ps_init", "EINVAL"],
              c.push_pull, K + 3, g, w)
        fails("binding: ps_init without weights on rank 0", pbox.Error, ["rank 0 must upload"],
              c.ps_init, K + 3, None, w)
        c.ps_init(K + 3, torch.arange(16.0), w)
        check(torch.equal(w, torch.arange(16.0)), f"weights after ps_init: expected 0..15, got {w}")
        fails("binding: grad of another size", pbox.Error, ["16 f32", "EINVAL"], c.push_pull,
              K + 3, torch.ones(8), w)
        fails("binding: grad of another dtype", pbox.Error, ["16 f32", "EINVAL"], c.push_pull,
              K + 3, torch.ones(16, dtype=torch.float16), w)
        fails("binding: negative lr", pbox.Error, ["learning rate", "EINVAL"], c.set_lr, K + 3,
              -1.0)
        fails("binding: undeclared key", pbox.Error, ["not a PS key"], c.push_pull, K + 9, g, w)
        c.set_lr(K + 3, 0.5)
        c.push_pull(K + 3, g, w)
        check(torch.equal(w, torch.arange(16.0) - 0.5),
              f"weights after a step of lr 0.5: expected 0..15 - 0.5, got {w}")
        # declared again alike (another lr): the key keeps its weights and
        # its ps_init, and steps on; a second ps_init and another optimizer
        # are refused at once (the init timed out and broke the key)
        c.declare_optimizer(K + 3, 16, "f32", "sgd", lr=0.25)
        c.push_pull(K + 3, g, w)
        check(torch.equal(w, torch.arange(16.0) - 0.75),
              f"weights after a step of lr 0.25: expected 0..15 - 0.75, got {w}")
        fails("binding: ps_init again", pbox.Error, ["already ran", "EINVAL"], c.ps_init,
              K + 3, torch.arange(16.0), w)
        fails("binding: another optimizer", pbox.Error, ["optimizer sgd, this call adam",
              "EINVAL"], c.declare_optimizer, K + 3, 16, "f32", "adam")
        c.push_pull(K + 3, g, w)
        check(torch.equal(w, torch.arange(16.0) - 1.0),
              f"weights after another step of lr 0.25: expected 0..15 - 1.0, got {w}")
        fails("binding: allreduce on a PS key", pbox.Error, ["PS key"], c.allreduce, g, K + 3)

    def rules():
        # BoxOptimizer's rules after construction
        opt = ps(m.parameters(), "sgd", c, name="rules", lr=0.1, momentum=0.9)
        F.cross_entropy(m(torch.randn(4, IN)), torch.tensor([0, 1, 2, 3])).backward()
        opt.param_groups[0]["momentum"] = 0.5
        fails("momentum changed after construction", ValueError, ["momentum", "only lr"],
              opt.step)
        opt.param_groups[0]["momentum"] = 0.9
        opt.param_groups[0]["lr"] = float("nan")
        fails("lr nan", ValueError, ["lr=nan"], opt.step)
        opt.param_groups[0]["lr"] = 0.1
        opt.step()
        sd = opt.state_dict()
        check_eq(len(sd["state"]), len(list(m.parameters())),
                 f"state_dict's state entries (one per parameter: {list(sd['state'].keys())})")
        check(all("momentum_buffer" in s for s in sd["state"].values()),
              lambda: f"state_dict: expected a momentum_buffer per parameter, got "
                      f"{[sorted(s) for s in sd['state'].values()]}")
        passed("state_dict after one step: a momentum_buffer per parameter")

    def overlap():
        # overlap=True must not push a stale gradient silently
        m2 = Net()
        opt2 = ps(m2.parameters(), "sgd", c, name="overlap", overlap=True, lr=0.1)
        x, y = torch.randn(4, IN), torch.tensor([0, 1, 2, 3])
        F.cross_entropy(m2(x), y).backward()
        torch.nn.utils.clip_grad_norm_(m2.parameters(), 0.01)
        fails("overlap: clipped after backward", RuntimeError, ["overlap=False", "modified"],
              opt2.step)
        opt2.zero_grad()
        F.cross_entropy(m2(x), y).backward()
        fails("overlap: second backward before step", RuntimeError, ["overlap=False",
              "second backward"], F.cross_entropy(m2(x), y).backward)
        # that backward added to gradients already pushed: step() waits for the
        # pushes and says so
        fails("overlap: step after it", RuntimeError, ["overlap=False", "modified"], opt2.step)
        opt2.zero_grad()
        F.cross_entropy(m2(x), y).backward()
        opt2.step()        # and goes on
        # closed, its hooks are gone: another optimizer of the same model
        # steps (the old hooks pushed opt2's keys in every backward, and the
        # second raised 'changed after the bucket was pushed')
        opt2.close()
        opt3 = ps(m2.parameters(), "adam", c, name="overlap-after", lr=1e-3)
        for _ in range(2):
            opt3.zero_grad()
            F.cross_entropy(m2(x), y).backward()
            opt3.step()
        passed("overlap: a closed optimizer's hooks push nothing; another one steps")

    def checkpoints():
        # a torch.optim checkpoint loads into a BoxOptimizer and back (world 1:
        # the box's mean is the rank's own gradient); default buckets, so one
        # key of 4522 floats: reads and writes of more than one small piece
        torch.manual_seed(5)
        a, b = Net(), Net()
        b.load_state_dict(a.state_dict())
        ta = torch.optim.Adam(a.parameters(), lr=1e-2, weight_decay=1e-4)
        ob = ps(b.parameters(), "adam", c, name="migrate", lr=1e-2, weight_decay=1e-4)

        def one_step(model, opt, s):
            opt.zero_grad()
            x, y = batch(9, s, 0)
            F.cross_entropy(model(x), y).backward()
            opt.step()

        def agree(what):
            for (k, p), q in zip(a.named_parameters(), b.parameters()):
                check(torch.allclose(q, p, rtol=RTOL, atol=ATOL),
                      lambda: f"{what}: {k}: expected torch.optim's within rtol {RTOL}, atol "
                              f"{ATOL}, max |difference| {(q - p).abs().max()}")

        for s_ in range(3):
            one_step(a, ta, s_)
        b.load_state_dict(a.state_dict())
        ob.load_state_dict(ta.state_dict())
        one_step(a, ta, 3)
        one_step(b, ob, 3)
        agree("torch.optim.Adam -> BoxOptimizer")
        ta.load_state_dict(ob.state_dict())
        a.load_state_dict(b.state_dict())
        one_step(a, ta, 4)
        one_step(b, ob, 4)
        agree("BoxOptimizer -> torch.optim.Adam")
        passed("checkpoints: torch.optim.Adam -> BoxOptimizer -> torch.optim.Adam, steps agree")
        # a fresh torch.optim.SGD's state (no momentum buffer yet) with
        # dampening: the first step starts the buffer as the gradient, as
        # torch does (written zeros were continued: (1 - dampening) * g)
        torch.manual_seed(6)
        a, b = Net(), Net()
        b.load_state_dict(a.state_dict())
        hyper = dict(lr=0.1, momentum=0.9, dampening=0.5)
        ta = torch.optim.SGD(a.parameters(), **hyper)
        ob = ps(b.parameters(), "sgd", c, name="sgd-fresh", **hyper)
        ob.load_state_dict(ta.state_dict())
        for s_ in range(2):
            one_step(a, ta, 10 + s_)
            one_step(b, ob, 10 + s_)
            agree(f"a fresh torch.optim.SGD state with dampening, step {s_}")
        passed("checkpoints: a fresh torch.optim.SGD state (dampening 0.5) loads, steps agree")
        # a torch.optim.SGD checkpoint in which the head never had a gradient
        # (no momentum buffer): it loads (the buffer as zeros, which the box
        # continues as torch starts one), and the steps agree once the head
        # is used (it was refused: 'different step counts [0, 1]')
        torch.manual_seed(7)
        a, b = Net(), Net()
        b.load_state_dict(a.state_dict())
        hyper = dict(lr=0.1, momentum=0.9, weight_decay=1e-3)
        ta = torch.optim.SGD(a.parameters(), **hyper)
        for s_ in range(2):
            ta.zero_grad()
            x, _ = batch(9, 20 + s_, 0)
            a.fc2(torch.tanh(a.fc1(x))).pow(2).mean().backward()   # no head
            ta.step()
        b.load_state_dict(a.state_dict())
        ob = ps(b.parameters(), "sgd", c, name="sgd-unused", **hyper)
        ob.load_state_dict(ta.state_dict())
        for s_ in range(2):
            one_step(a, ta, 22 + s_)
            one_step(b, ob, 22 + s_)
            agree(f"a torch.optim.SGD state without the head's buffers, step {s_}")
        passed("checkpoints: a torch.optim.SGD state with unused parameters loads, steps agree")

    def half():
        # 16-bit parameters: bf16/f16 gradients up, 16-bit weights back, fp32 on the box
        for dt in (torch.bfloat16, torch.float16):
            # elementwise only: torch 1.13 has no 16-bit matmul on the CPU
            ws = [nn.Parameter(torch.randn(40).to(dt)), nn.Parameter(torch.randn(7).to(dt))]
            w32 = [w.detach().float() for w in ws]
            o = ps(ws, "sgd", c, name=f"half-{dt}", lr=0.25)
            sum((w * torch.randn(w.numel()).to(dt)).sum() for w in ws).backward()
            g32 = [w.grad.float() for w in ws]
            o.step()
            for w, w0, g in zip(ws, w32, g32):
                want = (w0 - 0.25 * g).to(dt)
                check_eq(w.dtype, dt, "the parameter's dtype after a step")
                check(torch.equal(w.detach(), want),
                      f"{dt}: one step: expected {want}, got {w}")
            passed(f"{dt} parameters: one step as torch rounds it")
        # a save/load of a 16-bit Adam keeps the box's fp32 state: the run
        # resumed from the state_dict steps as the one never stopped, up to
        # the weights' own rounding (float16's exp_avg_sq of gradients
        # ~1e-4 was 0: the first step after the load moved weights by ~8)
        for dt in (torch.float16, torch.bfloat16):
            torch.manual_seed(3)
            w0 = torch.randn(1000).to(dt)
            gs = [(torch.randn(1000) * 1e-4).to(dt) for _ in range(6)]
            ends = []
            for resumed in (False, True):
                w = nn.Parameter(w0.clone())
                o = ps([w], "adam", c, name=f"half-sd-{dt}-{resumed}", lr=1e-3)
                for i, g in enumerate(gs):
                    if resumed and i == 3:
                        sd = o.state_dict()
                        o = ps([w], "adam", c, name=f"half-sd-{dt}-{resumed}-2", lr=1e-3)
                        o.load_state_dict(sd)
                    w.grad = g.clone()
                    o.step()
                ends.append(w.detach().float())
            # one 16-bit ulp of weights below 4: the load writes the 16-bit weights
            ulp = 2.0 ** -8 if dt == torch.float16 else 2.0 ** -6
            d = (ends[0] - ends[1]).abs().max().item()
            check_le(d, ulp, f"{dt} Adam resumed from its state_dict: max |difference| from "
                     "the run never stopped (one ulp)")
            passed(f"{dt} Adam: state_dict/load_state_dict resumes as never stopped ({d:.1e})")

    failed = []
    for section in (construction, binding, rules, overlap, checkpoints, half):
        try:
            section()
        except Exception as e:  # noqa: BLE001 (every failure is reported, the rest still run)
            failed.append(section.__name__)
            print(f"FAIL {section.__name__}: {type(e).__name__}: {e}")
            traceback.print_exc(limit=4)
    c.close()
    print(f"world-1 checks: {n} passed" + (f"; FAILED: {' '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cmd = sys.argv[1]
    if cmd == "rank":
        return main_rank(sys.argv[2])
    if cmd == "reference":
        return main_reference(sys.argv[2])
    if cmd == "compare":
        return main_compare(sys.argv[2], sys.argv[3:])
    if cmd == "bad":
        return main_bad(sys.argv[2])
    print(f"unknown command {cmd}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
