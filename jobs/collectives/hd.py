"""Halving-doubling allreduce (Rabenseifner): reduce-scatter by recursive halving, allgather by
recursive doubling.

Implements ``docs/resolutions.md`` Titan §1.3.1 with the **gloo labelling**: at reduce-scatter
step ``t = 1..k`` rank ``r`` exchanges with ``r XOR 2^(t-1)`` (rank 0 with 1 first, the
distance doubling while the payload halves); allgather step ``k+j`` mirrors reduce-scatter
step ``k+1-j``. The vector is split into ``p`` blocks with ``tensor_split``; at each halving
a rank keeps the lower half of its current block range when bit ``t-1`` of its rank is 0
(see :func:`jobs.patterns.hd_segments`), so ranges stay contiguous and rank ``r`` ends the
reduce-scatter owning block ``bitreverse(r)``.

For ``p`` not a power of two this is the **fold-in/fold-out model of §1.3.2** ([R] in the
spec, which notes that gloo itself uses binary blocks instead): with ``p' = 2^floor(log2 p)``
and ``e = p - p'``, rank ``p'+i`` (``i < e``) first sends its whole vector to rank ``i``,
which adds it; ranks ``0..p'-1`` run HD; finally rank ``i`` returns the whole result to rank
``p'+i``. ``T = 2·log2 p' + 2`` steps.

Cost: ``2·log2 p`` steps and ``2(p-1)/p·M`` bytes per rank for a power of two; folding adds
``2M`` on each folded pair. Extra memory: half the vector (fold-in: the whole vector).
:func:`jobs.patterns.hd_pattern` gives the same traffic.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from jobs.collectives._p2p import exchange
from jobs.patterns import hd_fold, hd_segments


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
