"""The collectives a job may name (``collective:`` in a config or a trace), each an object chosen once.

A part of the testbed that treats collectives differently asks the job's :class:`Collective`
(``collective_of(job.collective)``) what it needs to know, rather than comparing names: whether
the sum is made in the fabric (by aggregating switches and a parameter server) and what runs
instead where the fabric cannot aggregate. The traffic of the collectives that exchange transfers
between ranks is :mod:`jobs.patterns`; their torch implementations are :mod:`workers.collectives`.

Adding a collective is one entry in :data:`JOB_COLLECTIVES` (plus its implementation, and its
traffic if it is modelled). Pure: standard library only.
"""

from __future__ import annotations

import dataclasses

from common.errors import JobError, unknown_name

INA = "ina"
"""In-network aggregation (:mod:`ina`): one INA client per machine summing its ranks' sum, in the
agent runtime (:mod:`workers.agent`) and in torch workers (:mod:`workers.collectives.ina`), run where the
emulated fabric has aggregators (:mod:`emulator.ina_fabric`); its pattern is not a transfer schedule."""


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective a job may name.

    Attributes:
        name: its name in configs and traces (the key of :data:`JOB_COLLECTIVES`).
        help: one line for ``run_testbed.py list``.
        aggregates_in_fabric: its ranks' sum is made by aggregating switches and a parameter server
            (it needs INA switches and a PS), so its traffic is no schedule of transfers between ranks.
        fallback: the collective its jobs run where the fabric cannot aggregate (None: it needs no fabric).
    """

    name: str
    help: str
    aggregates_in_fabric: bool = False
    fallback: str | None = None


JOB_COLLECTIVES: dict[str, Collective] = {
    "ring": Collective("ring", "ring allreduce: reduce-scatter then allgather, 2(p-1) steps "
                               "(workers.collectives.ring)"),
    "hd": Collective("hd", "halving-doubling allreduce, fold-in/fold-out where p is not a power of two "
                           "(workers.collectives.hd)"),
    "gloo": Collective("gloo", "torch.distributed.all_reduce (gloo's own algorithm; the replay runtime and the "
                               "bounds use ring's traffic)"),
    INA: Collective(INA, "in-network aggregation on the fabric's P4 switches (ina/), one client per machine",
                    aggregates_in_fabric=True, fallback="ring"),
}
"""Every collective a job may name, by name."""


def collective_of(name: str) -> Collective:
    """The collective registered under ``name``; raises :class:`JobError` listing the valid names."""
    try:
        return JOB_COLLECTIVES[name]
    except KeyError:
        raise JobError(unknown_name("collective", name, JOB_COLLECTIVES)) from None
