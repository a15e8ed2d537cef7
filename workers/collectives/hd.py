"""Halving-doubling allreduce (Rabenseifner): reduce-scatter by recursive halving, allgather by
recursive doubling.

Implements ``docs/resolutions.md`` Titan §1.3.1 with the gloo labelling (step ``t`` partner
``r XOR 2^(t-1)``), and for ``p`` not a power of two the fold-in/fold-out model of §1.3.2 ([R]).
:func:`jobs.patterns.hd_pattern` gives the same traffic.

The exchanges, the blocks each rank keeps and the folding: ``docs/fidelity.md`` (Halving-doubling).
Cost: ``2·log2 p`` steps and ``2(p-1)/p·M`` bytes per rank for a power of two; folding adds ``2M`` on
each folded pair. Extra memory: half the vector (fold-in: the whole vector).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from jobs.patterns import hd_fold, hd_segments
from workers.collectives._p2p import exchange


def allreduce(tensor: torch.Tensor) -> None:
    """Sum ``tensor`` (1-D, contiguous) elementwise across all ranks of the default group, in place."""
    p, r = dist.get_world_size(), dist.get_rank()
    if p == 1:
        return
    p2, extra = hd_fold(p)
    if r >= p2:  # folded-in rank: hand over the vector, get the result back
        exchange(tensor, r - p2, None, None)
        exchange(None, None, tensor, r - p2)
        return
    if r < extra:
        incoming = torch.empty_like(tensor)
        exchange(None, None, incoming, p2 + r)
        tensor.add_(incoming)
    _halving_doubling(tensor, r, p2)
    if r < extra:
        exchange(tensor, p2 + r, None, None)


def _halving_doubling(tensor: torch.Tensor, r: int, p2: int) -> None:
    """Power-of-two HD among ranks ``0..p2-1`` of the default group."""
    blocks = torch.tensor_split(tensor, p2)
    starts = [0]
    for b in blocks:
        starts.append(starts[-1] + b.numel())

    def span(a: int, b: int) -> torch.Tensor:
        return tensor[starts[a]:starts[b]]

    segments = hd_segments(r, p2)
    scratch = torch.empty(starts[p2 // 2], dtype=tensor.dtype)  # the larger half, kept at step 1
    for t, (lo, hi, keep_lo, keep_hi) in enumerate(segments):
        send = span(keep_hi, hi) if keep_lo == lo else span(lo, keep_lo)
        keep = span(keep_lo, keep_hi)
        recv = scratch[: keep.numel()]
        exchange(send, r ^ (1 << t), recv, r ^ (1 << t))
        keep.add_(recv)
    for t in reversed(range(len(segments))):
        lo, hi, keep_lo, keep_hi = segments[t]
        other = span(keep_hi, hi) if keep_lo == lo else span(lo, keep_lo)
        exchange(span(keep_lo, keep_hi), r ^ (1 << t), other, r ^ (1 << t))
