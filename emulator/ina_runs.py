"""INA jobs in an experiment: the emulator back end's side of :class:`emulator.ina_fabric.InaFabric`.

An experiment whose jobs name collective ``ina`` (:data:`jobs.collective.INA`) runs with an
aggregator on every INA switch (:func:`experiment.config.schema.ina_switches`) and one
:class:`InaRuns` per policy, which the emulator back end (:class:`emulator.backend.EmulatorBackend`)
calls as jobs start and end: :meth:`InaRuns.begin` clears every aggregator, :meth:`InaRuns.start`
installs a job run's plan beside the running jobs' and has its PS serve it, :meth:`InaRuns.end`
reads its counters and removes it, :meth:`InaRuns.result` gives the counters as an
:class:`experiment.reporting.measurements.InaResult`. The PS defaults to rank 0's machine and every INA
switch may aggregate; a placement's ``ps_host`` and ``ina_switches`` override them.

Each step and the defaults in full: ``docs/ina.md`` (INA jobs in an experiment).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping

from backend.protocol import ExperimentJob
from common.errors import ConfigError, EmulationError, TestbedError
from emulator.ina_engines import resolve_engine
from emulator.ina_fabric import InaFabric, endpoints
from emulator.variants import ina_use
from experiment.config.schema import ExperimentConfig, ina_jobs
from experiment.reporting.ina_results import InaJobResult, InaResult
from ina.aggregator import Role
from ina.plan import JobPlan, plan_job, ps_host_of, tor_of, uplink_packets
from jobs.collective import INA, collective_of
from placement.base import Placement
from workers.launcher import ina_counters_path

FALLBACK_COLLECTIVE = collective_of(INA).fallback
"""What an INA job runs when INA is optional and no engine can run."""


@dataclasses.dataclass
class InaSetup:
    """The run's INA: its engine (None: not used) and why, its switches and their started fabric."""

    engine: str | None
    why: str
    switches: tuple[str, ...] = ()
    fabric: InaFabric | None = None


def resolve_ina(cfg: ExperimentConfig) -> tuple[str | None, str]:
    """The INA engine the run uses and why; ``(None, why)`` when it uses none.

    Raises:
        ConfigError: INA jobs with ``ina.use: required`` where the engine asked for cannot run
            (one line naming why and the way out).
    """
    if not ina_jobs(cfg):
        return None, "no job uses collective ina"
    try:
        return resolve_engine(cfg.ina.engine)
    except EmulationError as e:
        if ina_use(cfg.ina.use).required:
            raise ConfigError(f"config.ina: {e}; use engine auto or software, or ina.use: optional to run the INA "
                              f"jobs with the {FALLBACK_COLLECTIVE} allreduce") from None
        return None, f"{e}; INA jobs ran the {FALLBACK_COLLECTIVE} allreduce (ina.use: optional)"


def without_ina(cfg: ExperimentConfig) -> ExperimentConfig:
    """``cfg`` with every job whose collective aggregates in the fabric running that collective's
    fallback (:data:`FALLBACK_COLLECTIVE` for ``ina``) instead."""
    collectives = [collective_of(j.collective) for j in cfg.jobs]
    jobs = tuple(dataclasses.replace(j, collective=c.fallback) if c.aggregates_in_fabric else j
                 for j, c in zip(cfg.jobs, collectives, strict=True))
    return dataclasses.replace(cfg, jobs=jobs)


def _add(total: dict[str, int], counters: Mapping) -> None:
    for k, v in counters.items():
        if isinstance(v, int) and not isinstance(v, bool):
            total[k] = total.get(k, 0) + v


@dataclasses.dataclass
class _JobRuns:
    """An INA job's runs so far: ids, where its plan put it, counters summed."""

    ps_host: str
    leaves: tuple[str, ...]
    root: str | None
    job_ids: list[int] = dataclasses.field(default_factory=list)
    client: dict[str, int] = dataclasses.field(default_factory=dict)
    uplink: dict[str, int] = dataclasses.field(default_factory=dict)
    uplink_unaggregated: dict[str, int] = dataclasses.field(default_factory=dict)
    uplink_complete: bool = True


class InaRuns:
    """One policy's INA jobs on ``fabric`` (``docs/ina.md``, INA jobs in an experiment).

    Args:
        g: the topology.
        fabric: the started aggregators of the run's network.
        slots: slots in use at every aggregator.
        switches: the INA switches (those with an aggregator).
        out_dir: the policy's directory; the parameter servers' files go to ``out_dir/ina``.
        results: how results reach the workers (:data:`ina.plan.RESULTS`: the PS unicasts them,
            or the switches copy them to their children).

    Every job's packets carry the fabric's values per packet (:attr:`InaFabric.values_per_packet`).
    """

    def __init__(self, g, fabric: InaFabric, slots: int, switches: tuple[str, ...], out_dir: str,
                 results: str = "unicast"):
        self.g, self.fabric, self.slots, self.switches = g, fabric, slots, tuple(switches)
        self.results = results
        self.ps_dir = os.path.join(out_dir, "ina")
        self.next_id = 1
        self.running: dict[str, JobPlan] = {}
        self.jobs: dict[str, _JobRuns] = {}

    def begin(self) -> None:
        """Start the policy on a clean fabric: parameter servers a failed policy left are stopped,
        every aggregator's tables, slots and counters cleared."""
        self.fabric.stop_all_ps()
        self.fabric.install([], self.slots)

    def start(self, job: ExperimentJob, placement: Placement) -> dict:
        """Plan and install a run of INA job ``job``; its machines' :class:`workers.launcher.InaEndpoint`.

        Raises:
            EmulationError: the job cannot be planned (too many machines for the header's
                bitmap) or the fabric refused it.
        """
        machines = [s.machine for s in placement.slots]
        ps_host = ps_host_of(placement.ps_host, machines)
        if not self.fabric.aggregates:  # ina.pat_gbps 0: every packet to the PS
            allowed = []
        elif placement.ina_switches is None:
            allowed = list(self.switches)
        else:
            allowed = [s for s in placement.ina_switches if s in self.switches]
        job_id = self.next_id
        self.next_id += 1
        try:
            plan = plan_job(self.g, job_id, machines, ps_host, allowed, self.results, self.fabric.values_per_packet)
        except TestbedError as e:
            raise EmulationError(f"job {job.name!r} cannot run over INA: {e}") from None
        self.fabric.add_jobs([plan], self.ps_dir)
        self.running[job.name] = plan
        root = next((s for s, e in plan.entries.items() if e.role is Role.ROOT), None)
        runs = self.jobs.setdefault(job.name, _JobRuns(ps_host, tuple(sorted(s for s in plan.entries if s != root)),
                                                       root))
        runs.job_ids.append(job_id)
        return endpoints(self.fabric.net, plan)

    def end(self, job: str, run_dir: str) -> None:
        """A run of ``job`` ended (finished, preempted or failed to start): remove it from the
        fabric and add its workers' client counters (:func:`workers.launcher.ina_counters_path` in ``run_dir``)."""
        plan = self.running.pop(job, None)
        if plan is None:
            return
        runs = self.jobs[job]
        tors = {tor_of(self.g, m) for m in (*plan.bits, runs.ps_host)}
        forwarded = {s: t[plan.job_id] for s, t in self.fabric.job_traffic(tors, [plan.job_id]).items()}
        self.fabric.remove_jobs([plan.job_id])
        if not self.running:
            self.fabric.release_slots()
        sent: dict[str, int] = {}
        for m in plan.bits:
            path = ina_counters_path(run_dir, m)
            try:
                with open(path) as f:
                    counters = json.load(f).get(job, {})
            except (OSError, ValueError):
                runs.uplink_complete = False  # a killed (preempted) agent or worker writes none
                continue
            _add(runs.client, counters)
            sent[m] = counters.get("sent", 0)
        with_ina, unaggregated = uplink_packets(self.g, plan.bits, runs.ps_host, forwarded, sent)
        _add(runs.uplink, with_ina)
        _add(runs.uplink_unaggregated, unaggregated)

    def result(self, engine: str, why: str) -> InaResult:
        """Stop the parameter servers and collect every counter of the policy."""
        ps_stats = self.fabric.stop_all_ps()
        by_id: dict[int, dict] = {}
        for stats in ps_stats.values():
            for job_id, counters in (stats.get("jobs") or {}).items():
                by_id[int(job_id)] = counters
        jobs = {}
        for name, runs in self.jobs.items():
            ps: dict[str, int] = {}
            for job_id in runs.job_ids:
                _add(ps, by_id.get(job_id, {}))
            jobs[name] = InaJobResult(name, tuple(runs.job_ids), runs.ps_host, runs.leaves, runs.root,
                                      dict(runs.client), ps, dict(runs.uplink), dict(runs.uplink_unaggregated),
                                      runs.uplink_complete, self.fabric.values_per_packet)
        capacity = self.fabric.capacity.to_dict() if self.fabric.capacity is not None else None
        return InaResult(True, engine, why, self.slots, self.switches, self.fabric.counters(),
                         {h: {k: v for k, v in s.items() if k != "jobs"} for h, s in ps_stats.items()}, jobs,
                         capacity)


def unused_result(why: str, slots: int) -> InaResult:
    """The record of a run whose INA jobs ran without INA (``ina.use: optional``, no engine)."""
    return InaResult(False, "none", why, slots, (), {}, {}, {})
