# SPDX-License-Identifier: BSD-3-Clause
"""tasks.py - the training-quality suite's four tasks (bench/sparse_quality,
docs/performance.md "Sparse gradients: training quality"): small models on
synthetic data that train in a minute on two CPUs and differ in what
their gradients look like.

  mlp:         64-256-256-10 tanh MLP, labels from a random teacher MLP
               (dense, smooth gradients); SGD momentum 0.9.
  cnn:         2 conv + 2 fc on 1x16x16 Gaussian images, labels from a
               random convolutional teacher (small conv kernels: many
               small tensors); SGD momentum 0.9.
  embedding:   EmbeddingBag(20000, 32) over bags of 8 ids drawn from a
               Zipf-like law + a 2-layer head, labels from a teacher with
               its own table (gradients sparse by nature: only the rows
               seen); SGD momentum 0.9.
  transformer: one pre-norm causal transformer encoder block (d 32, 4
               heads, ff 64) with token and position embeddings on
               sequences of 16 tokens of 16 symbols; output i is the token
               at position x_i mod (i + 1), a pointer look-up that needs
               content-based attention; Adam lr 3e-3, batch 16.

Each (step, rank) draws its own batch from a generator seeded by the
step and rank, so every run of a task sees the same data and the model
starts from the same weights (seed)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CLASSES = 10


def _teacher_mlp():
    return nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(),
                         nn.Linear(256, CLASSES))


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(),
                         nn.Linear(64, CLASSES))


class _Bag(nn.Module):
    def __init__(self, vocab=20000, dim=32):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.head = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, CLASSES))

    def forward(self, ids):
        return self.head(self.emb(ids))


class _Block(nn.Module):
    def __init__(self, symbols=16, length=16, d=32):
        super().__init__()
        self.tok = nn.Embedding(symbols, d)
        self.pos = nn.Parameter(torch.randn(length, d) * 0.1)
        self.layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True,
                                                norm_first=True)
        self.out = nn.Linear(d, symbols)
        mask = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask)

    def forward(self, x):
        h = self.tok(x) + self.pos
        return self.out(self.layer(h, src_mask=self.mask))


class Task:
    name = ""
    opt = "sgd"
    lr = 0.1
    batch = 32

    def __init__(self, seed=1):
        self.seed = seed
        torch.manual_seed(10_000 + seed)
        self.teacher = self.make_teacher()
        if self.teacher is not None:
            for p in self.teacher.parameters():
                p.requires_grad_(False)

    def make_teacher(self):
        return None

    @staticmethod
    @torch.no_grad()
    def _balance(teacher, last, x):
        """Shift the teacher's output bias (last: its final Linear) so its
        mean logit over the reference inputs x is the same for every class:
        labels spread over the classes instead of one class taking most
        (the raw random teachers gave 88% one class on the CNN and 65% on
        the embedding task; a model then learns the prior and little else)."""
        for _ in range(3):
            last.bias.sub_(teacher(x).mean(0))

    def model(self):
        torch.manual_seed(self.seed)
        return self.make_model()

    def gen(self, step, rank):
        return torch.Generator().manual_seed(self.seed * 1_000_003 + step * 1009 + rank)

    @torch.no_grad()
    def heldout(self, model, n=4096):
        """The model's loss on n samples no run trains on (one batch drawn
        from a generator no training step uses)."""
        return float(self.loss(model, -1, 999, n))

    def optimizer(self, params):
        if self.opt == "adam":
            return torch.optim.Adam(params, lr=self.lr)
        return torch.optim.SGD(params, lr=self.lr, momentum=0.9)


class MLP(Task):
    name, lr = "mlp", 0.1

    def make_teacher(self):
        return _teacher_mlp()

    def make_model(self):
        return _teacher_mlp()

    def loss(self, model, step, rank, n=None):
        x = torch.randn((n or self.batch, 64), generator=self.gen(step, rank))
        return F.cross_entropy(model(x), self.teacher(x).argmax(1))


class CNN(Task):
    name, lr = "cnn", 0.05

    def make_teacher(self):
        t = _cnn()
        with torch.no_grad():
            for p in t.parameters():
                p.mul_(3.0)
        g = torch.Generator().manual_seed(77)
        self._balance(t, t[-1], torch.randn((4096, 1, 16, 16), generator=g))
        return t

    def make_model(self):
        return _cnn()

    def loss(self, model, step, rank, n=None):
        x = torch.randn((n or self.batch, 1, 16, 16), generator=self.gen(step, rank))
        return F.cross_entropy(model(x), self.teacher(x).argmax(1))


class Embedding(Task):
    name, lr = "embedding", 0.5
    vocab = 20000

    def make_teacher(self):
        t = _Bag(self.vocab)
        with torch.no_grad():
            t.emb.weight.mul_(2.0)
        self._balance(t, t.head[-1], self._ids(-2, 77, 4096))
        return t

    def make_model(self):
        return _Bag(self.vocab)

    def _ids(self, step, rank, n=None):
        g = self.gen(step, rank)
        # Zipf-like: rank r drawn with weight 1 / (r + 10)
        u = torch.rand((n or self.batch, 8), generator=g)
        ids = (torch.exp(u * math.log(self.vocab + 10)) - 10).long().clamp(0, self.vocab - 1)
        return ids

    def loss(self, model, step, rank, n=None):
        ids = self._ids(step, rank, n)
        return F.cross_entropy(model(ids), self.teacher(ids).argmax(1))


class Transformer(Task):
    name, opt, lr, batch = "transformer", "adam", 3e-3, 16

    def make_model(self):
        return _Block()

    def loss(self, model, step, rank, n=None):
        x = torch.randint(0, 16, (n or self.batch, 16), generator=self.gen(step, rank))
        pos = x % torch.arange(1, 17)
        y = torch.gather(x, 1, pos)
        return F.cross_entropy(model(x).reshape(-1, 16), y.reshape(-1))


TASKS = {t.name: t for t in (MLP, CNN, Embedding, Transformer)}
