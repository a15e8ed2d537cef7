"""Paired point-to-point exchange over the default process group, shared by the algorithms."""

from __future__ import annotations

import torch
import torch.distributed as dist


def exchange(send: torch.Tensor | None, dst: int | None, recv: torch.Tensor | None, src: int | None) -> None:
    """Send ``send`` to ``dst`` while receiving into ``recv`` from ``src``; wait for both.

    The receive is posted before the send and both are awaited, so two ranks exchanging with
    each other never deadlock. Either side may be ``None`` (or an empty tensor), which skips
    it: both ends compute the same sizes, so a skipped send always meets a skipped receive.
    ``dist.isend`` / ``dist.irecv`` are looked up at call time so tests can count bytes.
    """
    works = []
    if recv is not None and recv.numel() > 0:
        works.append(dist.irecv(recv, src))
    if send is not None and send.numel() > 0:
        works.append(dist.isend(send, dst))
    for w in works:
        w.wait()
