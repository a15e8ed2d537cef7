"""Ring allreduce: reduce-scatter then allgather around the ring of ranks.

``docs/resolutions.md`` Titan §1.3.3 (standard; Patarasuk and Yuan, JPDC 2009). The vector is
split into ``p`` chunks with ``tensor_split`` (the first ``n mod p`` chunks have one more
element, so any length works). ``2(p-1)`` steps; in each, rank ``r`` sends one chunk to
``(r+1) mod p`` and receives one from ``(r-1) mod p``:

* reduce-scatter step ``s`` (0-based): send chunk ``(r-s) mod p``, add the received chunk
  ``(r-s-1) mod p`` into place; afterwards rank ``r`` holds the sum of chunk ``(r+1) mod p``;
* allgather step ``s``: send chunk ``(r+1-s) mod p``, receive chunk ``(r-s) mod p`` in place.

Each rank sends ``2(p-1)/p·M`` bytes in total, the bandwidth optimum. Time O(p) steps,
extra memory one chunk. :func:`jobs.patterns.ring_pattern` gives the same traffic.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from workers.collectives._p2p import exchange


def allreduce(tensor: torch.Tensor) -> None:
    """Sum ``tensor`` (1-D, contiguous) elementwise across all ranks of the default group, in place."""
    p, r = dist.get_world_size(), dist.get_rank()
    if p == 1:
        return
    chunks = torch.tensor_split(tensor, p)
    right, left = (r + 1) % p, (r - 1) % p
    scratch = torch.empty_like(chunks[0])  # chunk 0 is the largest
    for s in range(p - 1):
        dst_chunk = chunks[(r - s - 1) % p]
        recv = scratch[: dst_chunk.numel()]
        exchange(chunks[(r - s) % p], right, recv, left)
        dst_chunk.add_(recv)
    for s in range(p - 1):
        exchange(chunks[(r + 1 - s) % p], right, chunks[(r - s) % p], left)
