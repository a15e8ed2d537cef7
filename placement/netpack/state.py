"""The network state a NetPack-family policy decides over: the jobs running now, as the
estimation sees them.

A :class:`placement.base.ClusterView` says which job owns each GPU, not where a job's parameter
server runs or where INA is on for it. A policy of this family remembers what it decided
(:class:`Decisions`); a running job it has no record of (placed before it, or by another
component) gets the defaults the testbed applies (:mod:`emulator.ina_runs`): its PS on its first
server, INA on at every rack. Jobs on one server use no network and are left out (§2.4 (6)/(7)).
"""

from __future__ import annotations

import dataclasses

from placement.base import ClusterView
from placement.netpack.network import Fabric, NetJob


@dataclasses.dataclass(frozen=True)
class Decision:
    """What a policy decided for one job: its PS server and the racks where INA is on."""

    ps: str | None
    ina: frozenset[str]


class Decisions:
    """A policy's memory of its decisions, by job name; forgets jobs no longer running."""

    def __init__(self):
        self._by_job: dict[str, Decision] = {}

    def record(self, job: str, decision: Decision) -> None:
        """Remember ``decision`` for ``job`` (replacing any earlier one: a restarted job)."""
        self._by_job[job] = decision

    def get(self, job: str) -> Decision | None:
        """The decision recorded for ``job``, or None."""
        return self._by_job.get(job)

    def running(self, view: ClusterView, fabric: Fabric) -> list[NetJob]:
        """The multi-server jobs running on ``view``, each with its recorded PS and INA racks (else
        the defaults: see the module docstring); forgets the decisions of jobs that left."""
        servers = view.job_machines()
        for gone in set(self._by_job) - set(servers):
            del self._by_job[gone]
        out = []
        for job, ss in servers.items():
            if len(ss) < 2:
                continue
            d = self._by_job.get(job)
            ps = d.ps if d is not None and d.ps is not None else ss[0]
            ina = d.ina if d is not None else frozenset(fabric.racks)
            out.append(NetJob(job, tuple(ss), ps, ina))
        return out
