"""The collective ``ina`` for torch workers: each machine's ranks sum in memory, one client per
machine sums the machines over in-network aggregation.

The same shape as the agent runtime's (``workers.agent._InaGroup``), with gloo inside a machine: the
ranks of a machine reduce to its lowest rank, that rank sums the machine's tensor with the others'
through its :class:`ina.client.InaClient` (fixed point at :data:`SCALE`), and broadcasts the sum to
the machine's ranks.

Where the endpoint comes from, the process groups and the precision: ``docs/ina.md`` (Replay and
torch workers over INA).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
import torch.distributed as dist

from common.errors import JobError
from workers.launcher import WorkerSpec, ina_counters_path

SCALE = float(2 ** 20)
"""Fixed-point scale of the gradients: int32 = round(float * SCALE)."""


class InaCollective:
    """The allreduce of one rank of an INA job (see ``docs/ina.md``); call it as any collective.

    Raises:
        JobError: the spec fails :meth:`check`.
    """

    @staticmethod
    def check(spec: WorkerSpec) -> None:
        """Raise :class:`JobError` unless ``spec`` has its machine's INA endpoint and the machine of
        every rank, its own rank's being its machine."""
        if spec.ina is None or len(spec.rank_machines) != spec.world:
            raise JobError(f"job {spec.job!r} rank {spec.rank}: collective 'ina' needs its machine's INA endpoint "
                           f"and the machine of each of its {spec.world} ranks")
        if spec.rank_machines[spec.rank] != spec.machine:
            raise JobError(f"job {spec.job!r} rank {spec.rank}: rank_machines puts it on "
                           f"{spec.rank_machines[spec.rank]}, not on its machine {spec.machine}")

    def __init__(self, spec: WorkerSpec):
        from ina.client import InaClient

        self.check(spec)
        self.spec = spec
        ranks_of: dict[str, list[int]] = {}
        for r, m in enumerate(spec.rank_machines):
            ranks_of.setdefault(m, []).append(r)
        self.group = None
        for m, ranks in ranks_of.items():  # in order of lowest rank, at every rank
            group = dist.new_group(ranks) if len(ranks) > 1 else None
            if m == spec.machine:
                self.group, self.leader = group, ranks[0]
        self.client = InaClient(spec.ina.job_id, spec.ina.bit, spec.ina.ps_addr, SCALE, bind=spec.ina.addr,
                                values_per_packet=spec.ina.values_per_packet) \
            if spec.rank == self.leader else None

    def __call__(self, tensor: torch.Tensor) -> None:
        """Sum ``tensor`` (1-D float32) over every rank of the job, in place."""
        if self.group is not None:
            dist.reduce(tensor, dst=self.leader, group=self.group)
        if self.client is not None:
            summed = self.client.allreduce(tensor.tolist())
            tensor.copy_(torch.tensor(summed, dtype=tensor.dtype))
        if self.group is not None:
            dist.broadcast(tensor, src=self.leader, group=self.group)

    def close(self) -> None:
        """Close the client; the machine's leader writes its counters to
        :func:`workers.launcher.ina_counters_path` in the records' directory."""
        if self.client is None:
            return
        self.client.close()
        path = ina_counters_path(Path(self.spec.records_path).parent, self.spec.machine)
        Path(path).write_text(json.dumps({self.spec.job: dataclasses.asdict(self.client.stats)}) + "\n",
                              encoding="utf-8")
