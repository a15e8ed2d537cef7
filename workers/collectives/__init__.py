"""Allreduce algorithms over gloo point-to-point, behind one interface.

A collective is a function ``allreduce(tensor) -> None`` that sums a 1-D contiguous float32
tensor elementwise across every rank of the default ``torch.distributed`` process group, in
place, with the exact same result on every rank. It must be called by all ranks in the same
order. ``p == 1`` is a no-op.

Adding one is a module with an ``allreduce`` function plus one line in :data:`COLLECTIVES`, one
in :data:`jobs.collective.JOB_COLLECTIVES` (what every other part asks of it) and, if its traffic
is modelled, one in :data:`jobs.patterns.PATTERNS`.

* ``ring``: :mod:`workers.collectives.ring` (reduce-scatter + allgather, ``2(p-1)`` steps).
* ``hd``: :mod:`workers.collectives.hd` (halving-doubling, fold-in/fold-out for ``p`` not a
  power of two).
* ``gloo``: :mod:`workers.collectives.gloo` (``torch.distributed.all_reduce``).
"""

from __future__ import annotations

from typing import Callable

import torch

from common.errors import JobError, unknown_name
from workers.collectives import gloo, hd, ring

Allreduce = Callable[[torch.Tensor], None]
"""One rank's allreduce, in place: what a job's collective runs in a torch worker."""

COLLECTIVES: dict[str, Allreduce] = {
    "ring": ring.allreduce,
    "hd": hd.allreduce,
    "gloo": gloo.allreduce,
}


def get_collective(name: str) -> Allreduce:
    """The allreduce function registered under ``name``; raises :class:`JobError` listing valid names."""
    try:
        return COLLECTIVES[name]
    except KeyError:
        raise JobError(unknown_name("collective", name, COLLECTIVES)) from None
