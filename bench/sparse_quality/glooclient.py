# SPDX-License-Identifier: BSD-3-Clause
"""glooclient.py - a stand-in for pbox.Client on a Gloo process group, for
the training-quality suite on one machine without a box: the sparse
allreduce (what topk_hook's worker-side path calls) gathers every rank's
densified entries and sums them in rank order, as the box does (so a run
is deterministic); dense allreduce likewise. It counts the bytes a rank
would send: 8 per sparse entry (u32 index + f32 value; the box's records
add headers, docs/protocol.md "Sparse keys"), 4 per dense element."""
import torch
import torch.distributed as dist


class _Done:
    def __init__(self, buf):
        self._buf = buf

    def wait(self):
        return self._buf

    def test(self):
        return True


class GlooClient:
    def __init__(self):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.bytes_sent = 0

    def _sum(self, t, out):
        parts = [torch.empty_like(t) for _ in range(self.world)]
        dist.all_gather(parts, t)
        out.copy_(parts[0])
        for p in parts[1:]:
            out.add_(p)
        return out

    def iallreduce_sparse(self, indices, values, out, key):
        idx = torch.as_tensor(indices).long()
        dense = torch.zeros(out.numel(), dtype=out.dtype)
        dense[idx] = torch.as_tensor(values)
        self.bytes_sent += 8 * idx.numel()
        return _Done(self._sum(dense, out.view(-1)))

    def iallreduce(self, buf, key):
        self.bytes_sent += 4 * buf.numel()
        return _Done(self._sum(buf.clone(), buf.view(-1)))

    # one rank a host: topk_hook's engine selects on every rank (the
    # topkhost runs emulate the host level on Gloo groups instead)
    host_layout = (0, 1)

    def release(self, keys):
        pass

    def topk_reset(self, key):
        pass

    def close(self):
        pass

    def stats(self):
        return {"bytes_sent": self.bytes_sent}
