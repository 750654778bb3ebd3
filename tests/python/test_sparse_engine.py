# SPDX-License-Identifier: BSD-3-Clause
"""test_sparse_engine.py - the worker side of sparse training (pbox/_sparse.py,
TopkState, TopkSGD, TopkAdam) without a box (make pycheck):

- bad input fails at construction: densities outside (0, 1], a schedule
  not ending at the target or not increasing, nesterov without momentum,
  momentum correction beside Adam or beside SGD's own momentum;
- the schedule: exponential from warmup_start to the target, then flat;
- TopkAdam (moments="global", the default, and "delayed") at density 1
  over two ranks is torch.optim.Adam on the averaged gradient;
  moments="local" is not; an entry arriving once in k steps with k steps'
  gradient moves as far as a dense one under "delayed", not under "global";
- momentum correction at density 1 is momentum SGD exactly (the sent
  sums equal torch's momentum buffer), Nesterov likewise; at density
  0.01 a weight sends its 1% share, a bias (under 1024) whole, and
  masking clears the momentum where sent;
- layer-aware selection sends every tensor's share each step and small
  tensors whole; "bucket" selection starves a tensor of small gradients
  (counted) and max_idle gives it entries;
- the selection's floor (min_entries): at least that many entries a
  bucket, the density alone above it;
- the host's rule (TopkState(host=True)): follow() sends nothing and
  the leader's whole positions as zeros; prepare(ranks=L) adds weight
  decay L times;
- the tensors sent whole apart (prepare(split=True), TopkState's
  whole="dense"): their positions and values come out beside the entries,
  none of them among the entries, and together they are exactly what the
  unsplit call sends; the residual is cleared there;
- state_dict() / load_state_dict() round-trip, pending until the bucket
  appears; other shapes drop the state with a RuntimeWarning."""
import math
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from checks import check, check_eq, check_raises, check_le  # noqa: E402

try:
    import torch
except ImportError:
    print("sparse engine: skipped: needs torch (/usr/bin/python3 has it)")
    sys.exit(0)

import pbox.torch as pt  # noqa: E402
from pbox import _sparse  # noqa: E402


class Stub:
    world, rank = 1, 0

    def release(self, keys):
        pass

    def close(self):
        pass


class Bucket:
    def __init__(self, params):
        self._p = params
        self._buf = torch.cat([p.grad.reshape(-1) for p in params])

    def parameters(self):
        return self._p

    def buffer(self):
        return self._buf


def engine(**kw):
    args = dict(density=0.01, error_feedback=True, momentum=0.0, nesterov=False, masking=True,
                clip=None, schedule=None, dense_below=1024, select="layer", max_idle=None)
    args.update(kw)
    if args["schedule"] is None:
        args["schedule"] = _sparse.Schedule(args["density"], [])
    return _sparse.Engine(**args)


def bad_input():
    c = Stub()
    for d in (0, -1, 1.01, float("inf"), "x"):
        check_raises(ValueError, pt.TopkState, c, density=d, what=f"density {d!r}")
    check_raises(ValueError, pt.TopkState, c, density=0.01, schedule=[(0, 1), (50, 0.1)],
                 words=("not at the target",))
    check_raises(ValueError, pt.TopkState, c, density=0.01, schedule=[(10, 1), (5, 0.01)],
                 words=("increasing",))
    check_raises(ValueError, pt.TopkState, c, nesterov=True, words=("momentum",))
    check_raises(ValueError, pt.TopkState, c, warmup=10, schedule=[(0, 0.01)])
    check_raises(ValueError, pt.TopkState, c, select="rows")
    check_raises(ValueError, pt.TopkState, c, whole="sparse", words=("whole",))
    for bad in (-1, 1.5, "many", True):
        check_raises(ValueError, pt.TopkState, c, min_entries=bad, words=("min_entries",))
    check_eq(pt.TopkState(c).engine.floor(), 1024, "min_entries' default without momentum")
    check_eq(pt.TopkState(c, momentum=0.9).engine.floor(), 0,
             "min_entries' default under momentum correction with masking")
    check_eq(pt.TopkState(c, momentum=0.9, masking=False).engine.floor(), 1024,
             "min_entries' default under momentum correction without masking")
    check_eq(pt.TopkState(c, momentum=0.9, min_entries=300).engine.floor(), 300,
             "min_entries given")
    m = torch.nn.Linear(3, 3)
    st = pt.TopkState(c, momentum=0.9)
    check_raises(ValueError, st.attach, torch.optim.Adam(m.parameters()), words=("SGD only",))
    check_raises(ValueError, st.attach, torch.optim.SGD(m.parameters(), lr=1, momentum=0.5))
    check_raises(ValueError, pt.TopkAdam, m.parameters(), st)
    check_raises(ValueError, pt.TopkSGD, m.parameters(), st, lr=1, momentum=0.8)
    st.attach(torch.optim.SGD(m.parameters(), lr=1))   # momentum 0 beside it: fine
    pt.TopkSGD(m.parameters(), pt.TopkState(c), lr=1, momentum=0.9)


def schedule():
    s = _sparse.warmup_schedule(0.001, 100, 0.25)
    check_eq(s(0), 0.25, "density at step 0")
    check(abs(s(50) - (0.25 * 0.001) ** 0.5) < 1e-12, f"geometric mean at the middle: {s(50)}")
    check_eq(s(100), 0.001, "density at the end")
    check_eq(s(10 ** 6), 0.001, "density after")


def params(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]


def random_grads(ps, g):
    """Fresh gradients for ps from generator g; their bucket."""
    for p in ps:
        p.grad = torch.randn(p.shape, generator=g)
    return Bucket(ps)


def momentum_exact(nesterov):
    ps = params((40, 50), (50,))
    opt = torch.optim.SGD(ps, lr=1.0, momentum=0.9, nesterov=nesterov)
    e = engine(density=1.0, momentum=0.9, nesterov=nesterov)
    g = torch.Generator().manual_seed(1)
    for step in range(5):
        b = random_grads(ps, g)
        before = [p.detach().clone() for p in ps]
        opt.step()
        want = torch.cat([(b0 - p.detach()).reshape(-1) for b0, p in zip(before, ps)])
        idx, val = e.prepare(1, b, b.buffer().clone(), 1)
        e.step += 1
        check_eq(idx.numel(), want.numel(), "density 1 sends every entry")
        check(torch.allclose(val, want, atol=1e-5),
              lambda: f"step {step}: momentum correction at density 1 differs from SGD by "
                      f"{(val - want).abs().max()}")


def adam_global_exact():
    """TopkAdam (moments="delayed" and "global") at density 1 over two ranks
    is torch.optim.Adam on the ranks' averaged gradient: the hook sends the
    raw gradient and the moments run on the average. (moments="local", the
    ranks' own Adam directions averaged, is not: it was the default.)"""
    class Stub2(Stub):
        world = 2
    for moments, exact in (("delayed", True), ("global", True), ("local", False)):
        ranks = []
        for r in range(2):
            ps = params((30, 40), (40,))
            st = pt.TopkState(Stub2(), density=1.0, warmup=0, model=ps)
            ranks.append((ps, st, pt.TopkAdam(ps, st, lr=0.01, moments=moments)))
        ref = params((30, 40), (40,))
        ref_opt = torch.optim.Adam(ref, lr=0.01)
        g = torch.Generator().manual_seed(3)
        for step in range(4):
            grads = [[torch.randn(p.shape, generator=g) * (1 + 3 * r) for p in ranks[r][0]]
                     for r in range(2)]
            sent = []
            for r, (ps, st, _) in enumerate(ranks):
                for p, gr in zip(ps, grads[r]):
                    p.grad = gr.clone()
                b = Bucket(ps)
                idx, val = st.engine.prepare(1, b, b.buffer().clone(), 2)
                st.engine.step += 1
                sent.append(torch.zeros(b.buffer().numel()).index_add_(0, idx, val))
            avg = (sent[0] + sent[1]) / 2
            for ps, _, opt in ranks:
                off = 0
                for p in ps:
                    p.grad = avg[off:off + p.numel()].view(p.shape).clone()
                    off += p.numel()
                opt.step()
            for i, p in enumerate(ref):
                p.grad = (grads[0][i] + grads[1][i]) / 2
            ref_opt.step()
        diff = max(float((a - b).abs().max()) for a, b in zip(ranks[0][0], ref))
        if exact:
            print(f"  TopkAdam(moments={moments!r}) vs Adam on the average: {diff:.2e}")
            check(diff < 1e-6, f"TopkAdam(moments={moments!r}) at density 1 differs from "
                               f"torch.optim.Adam on the average by {diff}")
        else:
            print(f"  TopkAdam(moments={moments!r}) vs Adam on the average: {diff:.2e}")
            check(diff > 1e-4, f"TopkAdam(moments='local') matched Adam on the average "
                               f"({diff}): this check would not see the difference")
    check_raises(ValueError, pt.TopkAdam, params((2,)), pt.TopkState(Stub()), moments="x")


def adam_delayed_entry():
    """An entry that arrives once in k steps carrying k steps' gradient
    (error feedback) moves its weight as far as k steps of Adam on the
    gradient would under moments="delayed"; under "global" about sqrt(k)
    steps' worth."""
    k, c, lr = 16, 0.5, 0.01
    moved = {}
    for moments in ("delayed", "global"):
        p = torch.nn.Parameter(torch.zeros(2))
        opt = pt.TopkAdam([p], pt.TopkState(Stub(), density=1.0, warmup=0, model=[p]), lr=lr,
                          moments=moments)
        for t in range(1, 4 * k + 1):
            # entry 0 every step; entry 1 every k-th step with k steps' sum
            p.grad = torch.tensor([c, k * c if t % k == 0 else 0.0])
            opt.step()
        moved[moments] = (-float(p[0]), -float(p[1]))
    d0, d1 = moved["delayed"]
    check(abs(d1 / d0 - 1) < 0.1, f"delayed: the sparse entry moved {d1:.4f}, the dense "
                                  f"one {d0:.4f}")
    g0, g1 = moved["global"]
    check(g1 / g0 < 0.5, f"global: the sparse entry moved {g1:.4f}, the dense {g0:.4f} "
                         "(this check would not see the lag)")
    print(f"  an entry arriving once in {k} steps moved {d1 / d0:.3f} of a dense one's way "
          f"(delayed), {g1 / g0:.3f} (global)")


def shares_and_masking():
    ps = params((100, 100), (100,))
    e = engine(density=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(2)
    u = torch.zeros(10100)
    total = torch.zeros(10100)
    sent = torch.zeros(10100)
    for _ in range(20):
        for p in ps:
            p.grad = torch.randn(p.shape, generator=g)
        b = Bucket(ps)
        gr = b.buffer().clone()
        u_ref = u * 0.9 + gr
        idx, val = e.prepare(1, b, gr, 1)
        sent[idx] += val
        rec = e._recs[1]
        total += u_ref
        # masking: where the weight sent, the momentum is cleared
        w_idx = idx[idx < 10000]
        check_eq(int((rec.u[w_idx] != 0).sum()), 0, "momentum left where sent")
        check_eq(int(((idx >= 10000).sum())), 100, "the bias (100 < 1024) goes whole")
        check_le(abs(int((idx < 10000).sum()) - 100), 13, "the weight's share (1% of 10000)")
        u = rec.u.clone()
        e.step += 1


def starvation():
    # a bucket of a large-gradient tensor and a small-gradient one
    big, small = params((100, 100), (60, 60))
    sel = {}
    for mode in ("layer", "bucket"):
        e = engine(density=0.01, select=mode)
        for _ in range(30):
            big.grad = torch.randn(big.shape) * 100
            small.grad = torch.randn(small.shape) * 0.01
            b = Bucket([big, small])
            idx, _ = e.prepare(7, b, b.buffer().clone(), 1)
            e.step += 1
        sel[mode] = e.starved
    check_eq(sel["layer"], 0, "layer-aware selection starves no tensor")
    check(sel["bucket"] >= 20, f"bucket selection starved the small tensor {sel['bucket']} "
                               "times of 30")
    e = engine(density=0.01, select="bucket", max_idle=5)
    for _ in range(30):
        big.grad = torch.randn(big.shape) * 100
        small.grad = torch.randn(small.shape) * 0.01
        b = Bucket([big, small])
        e.prepare(7, b, b.buffer().clone(), 1)
        e.step += 1
    check_le(e.longest_idle, 5, "max_idle bounds the starvation")
    check(e.forced >= 4, f"the guard gave entries {e.forced} times")


def whole_apart():
    for select in ("layer", "bucket"):
        ps = params((100, 100), (30,), (50, 40), (100,), seed=4)
        a = engine(density=0.01, momentum=0.9, select=select)
        b = engine(density=0.01, momentum=0.9, select=select)
        g = torch.Generator().manual_seed(5)
        for step in range(6):
            bk = random_grads(ps, g)
            idx, val = a.prepare(1, bk, bk.buffer().clone(), 1)
            sidx, sval, whole, wval = b.prepare(1, bk, bk.buffer().clone(), 1, split=True)
            a.step += 1
            b.step += 1
            want = torch.cat([torch.arange(10000, 10030), torch.arange(12030, 12130)])
            check(torch.equal(whole, want), f"{select}: the whole tensors' positions")
            check_eq(int(torch.isin(sidx, whole).sum()), 0, f"{select}: no whole entry sent twice")
            got = torch.zeros(12130).index_add_(0, sidx, sval)
            got[whole] = wval
            ref = torch.zeros(12130).index_add_(0, idx, val)
            check(torch.equal(got, ref), f"{select} step {step}: split differs from unsplit")
            check_eq(int((b._recs[1].v[whole] != 0).sum()), 0, "residual cleared where whole")
        check(torch.equal(a._recs[1].v, b._recs[1].v), f"{select}: the same residual")
    # density 1: everything as entries, nothing apart
    e = engine(density=1.0)
    ps = params((40, 50), (50,))
    for p in ps:
        p.grad = torch.randn(p.shape)
    bk = Bucket(ps)
    out = e.prepare(1, bk, bk.buffer().clone(), 1, split=True)
    check(out[2] is None and out[0].numel() == 2050, "density 1 sends every entry, none apart")


def floor():
    """min_entries: a bucket's selection takes at least that many entries
    (all of its sparse tensors' if fewer), the density alone above it."""
    ps = params((100, 100), (30,), seed=9)
    for want_floor, dens in ((300, 0.001), (0, 0.001), (300, 0.05), (20000, 0.001)):
        e = engine(density=dens, select="bucket")
        e.min_entries = want_floor
        g = torch.Generator().manual_seed(10)
        bk = random_grads(ps, g)
        idx, val = e.prepare(1, bk, bk.buffer().clone(), 1)
        sparse = int((idx < 10000).sum())   # the weight's; the bias (30) goes whole
        k = max(math.ceil(dens * 10000), min(want_floor, 10000))
        check(k - k // 8 <= sparse <= k + k // 8 + 1,
              f"floor {want_floor} at density {dens}: {sparse} entries, want about {k}")


def host_rule():
    """TopkState(host=True)'s pieces: follow() gives a rank that does not
    select no entries and the selecting rank's whole positions, as zeros;
    prepare(ranks=L) adds weight decay L times (the host's sum holds L
    ranks' gradients)."""
    ps = params((100, 100), (30,), seed=6)
    lead, other = engine(density=0.01), engine(density=0.01)
    g = torch.Generator().manual_seed(7)
    bk = random_grads(ps, g)
    idx, val, whole, wval = lead.prepare(1, bk, bk.buffer().clone(), 2, split=True, ranks=2)
    fidx, fval, fwhole, fwval = other.follow(1, bk, split=True)
    check(fidx.numel() == 0 and fval.numel() == 0, "follow: no entries")
    check(torch.equal(fwhole, whole) and torch.equal(fwval, torch.zeros(whole.numel())),
          "follow: the leader's whole positions, zeros")
    check_eq(other.sent, 0, "follow sends nothing")
    check(other.follow(1, bk)[0].numel() == 0, "follow without split: no entries")
    # weight decay, once per rank of the host
    ps = params((10,), seed=8)
    ps[0].grad = torch.zeros(10)
    for ranks in (1, 3):
        e = engine(density=1.0, dense_below=0)
        e.weight_decay = {id(ps[0]): 0.5}
        b = Bucket(ps)
        idx, val = e.prepare(1, b, b.buffer().clone(), 1, ranks=ranks)
        check(torch.allclose(val, 0.5 * ranks * ps[0].detach()),
              f"weight decay added {ranks} time(s)")


def state_roundtrip():
    ps = params((40, 50), (50,))
    e = engine(density=0.01, momentum=0.9)
    e.params = ps
    for p in ps:
        p.grad = torch.randn(p.shape)
    b = Bucket(ps)
    e.prepare(3, b, b.buffer().clone(), 1)
    e.step = 7
    sd = e.state_dict()
    f = engine(density=0.01, momentum=0.9)
    f.params = ps
    f.load_state_dict(sd)
    check_eq(f.step, 7, "step")
    b2 = Bucket(ps)
    f._record(9, b2)
    check(torch.equal(f._recs[9].v, e._recs[3].v), "residual restored")
    check(torch.equal(f._recs[9].u, e._recs[3].u), "momentum restored")
    other = params((40, 51), (50,))
    h = engine(density=0.01, momentum=0.9)
    h.params = other
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        h.load_state_dict(sd)
    check(any("shapes changed" in str(x.message) for x in w), "a warning for other shapes")
    check_eq(len(h._pending), 0, "nothing kept of other shapes")


def main():
    bad_input()
    schedule()
    momentum_exact(False)
    momentum_exact(True)
    adam_global_exact()
    adam_delayed_entry()
    shares_and_masking()
    starvation()
    whole_apart()
    floor()
    host_rule()
    state_roundtrip()
    print("sparse engine: bad input, schedule, momentum correction, selection, whole tensors apart, the selection's floor, the host's rule, state_dict: ok")


if __name__ == "__main__":
    main()
