"""gloo's own allreduce, through ``torch.distributed.all_reduce``.

The algorithm is gloo's internal choice (a pipelined, segmented ring in the gloo source we
read); its traffic pattern is not modelled (see :mod:`jobs.patterns`).
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def allreduce(tensor: torch.Tensor) -> None:
    """Sum ``tensor`` elementwise across all ranks of the default group, in place."""
    if dist.get_world_size() > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
