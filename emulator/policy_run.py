"""One policy's run on the emulated network, measured: place, run every job, collect the evidence.

:class:`PolicyMeasurement` is one policy's run on a session's network
(:class:`emulator.runner.EmulatorSession`), in steps: :meth:`~PolicyMeasurement.run_loop` (the
experiment loop, :mod:`experiment.run.loop`, drives the emulator's clock,
:class:`emulator.backend.EmulatorBackend`, with the CPU and the switch ports sampled meanwhile),
:meth:`~PolicyMeasurement.check_health` (the port sampler and the controller kept up) and
:meth:`~PolicyMeasurement.result` (bytes and marks per link and wave, CPU, every job's evidence and
verdict, :mod:`measure.fidelity`, and the simulator's estimate on the run's own schedule,
:mod:`experiment.run.resimulate`).

Why the policies of a run can share one network: ``docs/architecture.md`` (The emulator back end).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping, Sequence

from common.errors import EmulationError
from common.units import scale_bw_mbps
from emulator.backend import BatchResult, EmulatorBackend
from emulator.cpu import CpuSampler
from emulator.ina_runs import InaRuns, unused_result
from emulator.queues import PortSampler
from emulator.shell import open_cli
from experiment.config.schema import ExperimentConfig
from experiment.config.workload import config_cluster, experiment_jobs
from experiment.reporting.ina_results import InaJobResult, InaResult
from experiment.reporting.measurements import (
    ClusterState,
    EcnSetup,
    PolicyResult,
    PortSamplerStats,
    StartRecord,
    WaveLinks,
)
from experiment.reporting.report import summarise_policy
from experiment.reporting.results import write_json
from experiment.reporting.timeline import up_phases
from experiment.run.loop import LoopEvent, LoopResult
from experiment.run.policy import cluster_over_run, last_starts, place_and_run
from measure import fidelity
from measure.iterations import job_iteration_times
from measure.linkstats import LinkSeries, counter_series, read_queue_samples
from measure.shaping import virtual_rates_mbps
from placement.metrics import fragmentation, used_machines


class PolicyMeasurement:
    """One policy's run on a session's network (see the module docstring).

    Args:
        session: the run's :class:`emulator.runner.EmulatorSession` (config, topology, network,
            progress, ECN path and hosts' TCP settings, INA fabric, how workers start).
        spec: the placement policy.
        pdir: the policy's directory.
    """

    def __init__(self, session, spec: str, pdir: str):
        self.s, self.spec, self.pdir = session, spec, pdir
        self.cfg: ExperimentConfig = session.cfg
        os.makedirs(pdir, exist_ok=True)
        self.t_start = time.time()
        fabric = session.ina.fabric if session.ina is not None else None
        self.sampler = CpuSampler(watch=fabric.processes if fabric is not None else None)
        self.queue_path = os.path.join(pdir, "queue_stats.jsonl")
        net = session.net
        self.ports = PortSampler(self.queue_path, net.counters.port_links(), net.marker, self.cfg.ecn.sample_interval_s,
                                 net.counters.qdisc_stats)
        self.batches: list[list[str]] = []
        self.cluster_states: list[ClusterState] = []
        self.cluster = config_cluster(self.cfg, session.g)

    def on_batch(self, index: int, runs) -> None:
        """A batch (wave) started: its jobs, and the cluster as it stands with them."""
        self.batches.append([job.name for job, _ in runs])
        view = self.cluster.view()  # the loop has applied the batch's placements: every running job is in it
        self.cluster_states.append(ClusterState(index, used_machines(view), fragmentation(view)))
        self.s.progress.say(f"    wave {index}: " + "; ".join(
            f"{p.job} on {len(p.machines)} machine(s) {','.join(p.machines)}" for _, p in runs))

    def open_cli(self, runs) -> None:
        """Mininet's CLI on the fabric before the first jobs start (:mod:`emulator.shell`); the
        policy's bytes per link count from when the user leaves it."""
        open_cli(self.s.net.mn, self.spec, runs, self.s.progress.say)
        self.counters_before = self.s.net.counters.switch_counters()

    def on_event(self, event: LoopEvent) -> None:
        """Say a preemption."""
        if event.kind == "preempted":
            self.s.progress.say(f"    {event.job} preempted at {event.time_s:.2f} s")

    def run(self) -> tuple[PolicyResult, tuple]:
        """The policy's run, checked and measured; ``measurements.json`` written, the summary set; with
        the cluster at each arrival (:func:`experiment.run.policy.cluster_over_run`)."""
        loop, backend, link_bytes, ina_result = self.run_loop()
        self.check_health()
        waves = sorted(backend.waves, key=lambda w: w.index)
        records = [r for w in waves for r in w.records]
        result = self.result(loop, waves, records, link_bytes, ina_result)
        write_json(os.path.join(self.pdir, "measurements.json"), result.to_dict())
        series, figures = cluster_over_run(self.cfg, self.s.g, loop, experiment_jobs(self.cfg, self.s.g))
        result.summary = dataclasses.replace(
            summarise_policy(self.cfg, self.s.g, result, records, self.s.backend_name), cluster=figures)
        return result, series

    def run_loop(self) -> tuple[LoopResult, EmulatorBackend, dict, InaResult | None]:
        """The loop on the emulator with the samplers running; the bytes per link over the whole
        policy (counted once: batches of an online schedule overlap) and the INA result."""
        s, cfg = self.s, self.cfg
        ina_runs = None
        if s.ina is not None and s.ina.fabric is not None:
            ina_runs = InaRuns(s.g, s.ina.fabric, cfg.ina.slots, s.ina.switches, self.pdir, cfg.ina.results)
            ina_runs.begin()
        backend = EmulatorBackend(cfg, s.net, self.pdir, s.progress, on_batch=self.on_batch, ina=ina_runs,
                                  spawn=s.spawn, before_first=self.open_cli if s.cli else None)
        self.counters_before = s.net.counters.switch_counters()
        self.sampler.start()
        self.ports.start()
        try:
            loop = place_and_run(cfg, s.g, self.spec, backend, self.on_event, self.cluster)
        finally:
            backend.close()
            self.sampler.stop()
            self.ports.stop()
        link_bytes = s.net.counters.link_bytes(self.counters_before, s.net.counters.switch_counters())
        if ina_runs is not None:
            ina_result = ina_runs.result(s.ina.engine, s.ina.why)
        elif s.ina is not None:
            ina_result = unused_result(s.ina.why, cfg.ina.slots)
        else:
            ina_result = None
        return loop, backend, link_bytes, ina_result

    def check_health(self) -> None:
        """Raise :class:`EmulationError` when the port sampler failed or the controller logged an exception."""
        if self.ports.error:
            raise EmulationError(f"sampling the switch ports failed: {self.ports.error}")
        controller = self.s.net.controller
        error = controller.logged_exception()
        if error:
            raise EmulationError(f"the controller logged an exception: {error}; see {controller.log_path}")

    def result(self, loop: LoopResult, waves: Sequence[BatchResult], records: Sequence, link_bytes: dict,
               ina_result: InaResult | None) -> PolicyResult:
        """Everything measured of the policy, with every job's verdict and estimate (``waves`` in
        order, ``records`` their ranks' iteration records)."""
        s, cfg, g, net = self.s, self.cfg, self.s.g, self.s.net
        starts = start_records(loop, self.batches)
        placements = last_starts(starts)
        rates = dict(net.rates)
        stats_path = os.path.join(net.run_dir, "port_stats.jsonl")
        windows = [w.window_s for w in waves if w.window_s]
        if windows:
            await_sample_after(stats_path, max(end for _, end in windows))
        series = LinkSeries(g, stats_path)
        queue_samples = read_queue_samples(self.queue_path)
        marks = counter_series(queue_samples, "marks") if net.options.ecn.measures else None
        cpu_measured = self.sampler.summary(windows)
        if ina_result is not None and ina_result.used:
            ina_result = dataclasses.replace(ina_result, cpu=self.sampler.process_p95(windows or None))
        evidence = job_evidence(cfg, placements, records, ina_result.jobs if ina_result else None)
        pat = cfg.ina.pat_gbps
        verdicts = fidelity.job_verdicts(g, virtual_rates_mbps(g, cfg.scale), evidence, cfg.mtu,
                                         pat_mbps=None if pat is None else scale_bw_mbps(pat * 1000, cfg.scale))
        timeline = up_phases(records, cfg.dilation)
        estimates = s.estimate(cfg, g, loop, self.batches, timeline,
                               {e.job: e.bucket_bytes for e in evidence if e.bucket_bytes})
        link_checks = fidelity.link_checks(queue_samples, rates, windows or None, cfg.mtu, cfg.queue_packets)
        ports = self.ports
        return PolicyResult(
            policy=self.spec, scheduler=cfg.scheduler, placements=placements, starts=starts,
            cluster_states=tuple(self.cluster_states), waves=tuple(wave_links(w, series, marks) for w in waves),
            jct_s=loop.jct_s, preemptions=loop.preemptions,
            preemption_overhead_s=loop.preemption_overhead_s, link_bytes=link_bytes, link_rate_mbps=rates,
            cpu=self.sampler.summary(), cpu_measured=cpu_measured, ecn=EcnSetup(s.ecn[0], s.ecn[1], s.hosts_tcp or {}),
            fidelity=fidelity.assess(cpu_measured, link_checks, verdicts), estimates=estimates, scale=cfg.scale,
            dilation=cfg.dilation,
            port_sampler=PortSamplerStats(ports.samples_taken, cfg.ecn.sample_interval_s,
                                          ports.cost_s / max(1, ports.samples_taken)),
            dir=self.pdir, queue_stats=os.path.basename(self.queue_path), wall_time_s=time.time() - self.t_start,
            ina=ina_result, decisions=tuple(d.to_dict() for d in loop.decisions),
            timeline=timeline)


SAMPLE_WAIT_S = 3.0
"""The longest a policy's result waits for the controller's port sample after its last window."""


def await_sample_after(path: str, t: float, timeout_s: float = SAMPLE_WAIT_S) -> bool:
    """Wait until the controller's port samples (``path``, JSON lines with ``t``) reach past wall time
    ``t``, so the last window's bytes are covered by a sample on either side; False after
    ``timeout_s`` (the window's bytes are then left out, as without samples)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 4096))
                tail = f.read().decode("utf-8", "replace").splitlines()[1:]  # the first may be cut
        except OSError:
            tail = []
        for line in tail:
            try:
                if float(json.loads(line)["t"]) > t:
                    return True
            except (ValueError, KeyError, TypeError):
                continue  # a line being written
        if time.monotonic() > deadline:
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def start_records(loop: LoopResult, batches: list[list[str]]) -> tuple[StartRecord, ...]:
    """Every start of the loop with the batch (wave) it started in. The loop starts each batch's
    jobs in one call, in order, so the starts follow the batches one after another."""
    out, queue = [], [(i, job) for i, jobs in enumerate(batches) for job in jobs]
    if [job for _, job in queue] != [st.job for st in loop.starts]:
        raise EmulationError("the emulator's batches do not match the loop's starts")
    for (i, _), st in zip(queue, loop.starts, strict=True):
        out.append(StartRecord(i, st.time_s, st.placement))
    return tuple(out)


def job_evidence(cfg: ExperimentConfig, placements: Sequence[StartRecord], records,
                 ina_jobs: Mapping[str, InaJobResult] | None = None) -> list[fidelity.JobEvidence]:
    """What the fidelity monitor needs of every placed job: where its ranks ran, the buckets its
    ranks really allreduced (from their records), its communication time in virtual seconds and,
    for an INA job, its parameter server's machine and the switches that aggregated it (``ina_jobs``)."""
    times = job_iteration_times(records, cfg.dilation)
    first, windows = {}, {}
    for r in records:
        if r.rank == 0 and (r.job not in first or r.iteration < first[r.job].iteration):
            first[r.job] = r
        a, b = windows.get(r.job, (r.start_time_s, r.start_time_s + r.iteration_s))
        windows[r.job] = (min(a, r.start_time_s), max(b, r.start_time_s + r.iteration_s))
    out = []
    for p in placements:
        job = next(j for j in cfg.jobs if j.name == p.job)
        its = times.get(job.name, {})
        comm = [v.comm_s for v in its.values()]
        rec = first.get(job.name)
        out.append(fidelity.JobEvidence(
            job=job.name, wave=p.wave, machines_by_rank=p.machines_by_rank,
            collective=job.collective, bucket_bytes=tuple(rec.bucket_bytes) if rec else (),
            comm_mean_s=sum(comm) / len(comm) if comm else None,
            complete=len(its) == cfg.iterations and all(v.ranks == job.workers for v in its.values()),
            window_s=windows.get(job.name), **_ina_evidence((ina_jobs or {}).get(job.name), cfg.ina.results)))
    return out


def _ina_evidence(ina: InaJobResult | None, results: str) -> dict:
    """An INA job's PS machine, aggregating switches and results mode, as
    :class:`measure.fidelity.JobEvidence` fields."""
    if ina is None:
        return {}
    return {"ps_host": ina.ps_host, "ina_switches": (*ina.leaves, *((ina.root,) if ina.root else ())),
            "ina_results": results, "ina_values_per_packet": ina.values_per_packet}


def wave_links(w: BatchResult, series: LinkSeries, marks=None) -> WaveLinks:
    """A wave's bytes (and ECN marks, when measured) per link, whole and inside its window.

    ``marks`` is the :class:`measure.linkstats.Series` of the ports' mark counters, or None
    when ECN was not measured (then ``window_link_marks`` is None, never zeros).
    """
    window_bytes: dict = {}
    window_marks = None if marks is None else {}
    if w.window_s:
        for link in sorted(w.link_bytes):
            b = series.bytes_between(link, *w.window_s)
            if b is not None:
                window_bytes[link] = round(b)
            m = marks.between(link, *w.window_s) if marks is not None else None
            if m is not None:
                window_marks[link] = round(m)
    return WaveLinks(w.index, tuple(w.jobs), w.duration_s, w.startup_s, tuple(w.window_s) if w.window_s else None,
                     dict(w.link_bytes), window_bytes, window_marks, w.ecn)


