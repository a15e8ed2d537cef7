"""Summaries, tables, CSV/JSON files and plots of an experiment's results.

Definitions used in every table:

* *machines*: machines hosting a worker of some job; *idle used*: those of them that were idle
  (no background load) before; *in use*: machines of the cluster with any busy GPU (background
  or jobs), and *fragmented*: machines partly used, both at the busiest wave (the cluster
  metrics of the Titan paper);
* *communication time per iteration* of a job: for each recorded iteration, the largest
  communication time over the job's ranks (the allreduce ends for the job when its slowest
  rank is done); mean and 99th percentile over all iterations of all jobs;
* *cross-machine bytes*: bytes that left machines onto the fabric (machine -> switch links),
  warm-up iterations and rendezvous included, summed over waves;
* *measurement window* of a wave: from the start of its first recorded iteration to the end
  of its last (worker start-up and warm-up excluded);
* *busiest-link utilisation*: over every directed link and wave, the highest
  ``bytes in the window * 8 / (window length * emulated link rate)``, bytes from the
  controller's port-statistics samples;
* *CPU*: whole-machine utilisation sampled inside the measurement windows; a 95th
  percentile at or above 95% flags the policy's timings as possibly CPU-bound;
* *ECN marks*: packets marked CE at switch egress ports inside the measurement windows
  (summed over links and waves); *marks on the busiest port*: on the busiest link that
  leaves a switch port (links leaving a machine are not marked: that queue is the sender's
  own), in its wave's window; a job's marks: marked packets of the job's connections from the
  start gate to the end of its wave (warm-up included), attributed by the BPF marker's
  per-flow counters. When ECN was not measured these are absent ("-"), never zero;
* *times* are virtual (paper-scale) seconds: measured wall-clock time divided by the run's
  time dilation factor D (``dilation``); link utilisation and byte counts need no conversion;
* *bound* of a job: its contention-free communication time per iteration on its placement
  and routes (:func:`jobs.steps.job_bound_s`, bytes on the wire at the run's MTU); *ratio*:
  measured / bound, checked for jobs that had their links to themselves in their wave;
* *trust*: the fidelity monitor's verdict (:mod:`measure.fidelity`): an uncontended job more
  than 10% slower (or 5% faster) than its bound, or a backlogged port that sent more than
  10% below its rate, flags a policy's run; CPU saturation flags it only when no job could be
  checked, and is otherwise reported as evidence.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence

from common.jsonfile import write_json_atomic
from common.units import MEGA
from experiment.reporting.breakdown import BucketComparison, compare_buckets, error_split
from experiment.reporting.cluster_metrics import cluster_lines
from experiment.reporting.efficiency import distribution_efficiency, jct_lines
from experiment.reporting.ina_results import InaJobResult, InaResult
from experiment.reporting.interleaving import HOLD, OVERLAP_THRESHOLD, interleaving
from experiment.reporting.measurements import PolicyResult
from experiment.reporting.report_files import write_file_plots
from experiment.reporting.summary import (
    EmulatedFigures,
    EmulatedJobFigures,
    JobSummary,
    PolicySummary,
    all_comparisons,
    all_mark_comparisons,
    completion_figures,
)
from experiment.reporting.tables import format_table
from experiment.reporting.timeline import format_marks, mean_marks, plot_timelines
from experiment.reporting.validation import (
    MarksComparison,
    comparable,
    job_class,
    marks_to_dict,
    marks_validation_lines,
    stats_by_class,
    validation_stats,
)
from jobs.phase import phase_figures
from jobs.records import bucket_times_s
from measure.fidelity import JobVerdict
from measure.iterations import job_iteration_times


def percentile(values, q: float) -> float | None:
    """The ``q`` percentile (0..100) by linear interpolation, None for no values."""
    v = sorted(values)
    if not v:
        return None
    pos = (len(v) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _mean(values) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _utilisation(nbytes: float, length_s: float, rate_mbps: float) -> float | None:
    return nbytes * 8 / (length_s * rate_mbps * MEGA) if length_s > 0 else None


@dataclasses.dataclass(frozen=True)
class LinkRow:
    """One directed link of one wave (a row of ``link_bytes.csv``).

    ``bytes``, ``duration_s`` and ``wave_utilisation`` cover the whole wave (kernel counters,
    start-up included); ``window_bytes``, ``window_s`` and ``window_utilisation`` the measurement
    window (None where the window or the samples do not cover the link); ``window_marks``: ECN
    marks on the link's egress port in the window (None when ECN was not measured or the link's
    direction has no switch port: machine -> switch).
    """

    wave: int
    src: str
    dst: str
    rate_mbps: float
    bytes: int
    duration_s: float
    wave_utilisation: float | None
    window_bytes: int | None
    window_s: float | None
    window_utilisation: float | None
    window_marks: int | None

    @property
    def name(self) -> str:
        """``src->dst``."""
        return f"{self.src}->{self.dst}"


def link_rows(result: PolicyResult):
    """Every directed link of every wave of a policy's result (:class:`LinkRow`)."""
    rates = result.link_rate_mbps
    for w in result.waves:
        length_s = w.window_length_s
        for (u, v), b in sorted(w.link_bytes.items()):
            rate = rates.get((u, v)) or rates[(v, u)]
            wb = w.window_link_bytes.get((u, v))
            yield LinkRow(w.index, u, v, rate, b, w.duration_s, _utilisation(b, w.duration_s, rate), wb,
                          length_s if w.window_s else None,
                          None if wb is None else _utilisation(wb, length_s, rate),
                          None if w.window_link_marks is None else w.window_link_marks.get((u, v)))


def summarise_policy(cfg, g, result: PolicyResult, records, backend: str) -> PolicySummary:
    """The per-policy summary written to ``summary.json`` and shown in the tables; ``backend``: the name
    of the back end that measured ``result``."""
    machines_used = {m for p in result.placements for m in p.machines_by_rank}
    times = job_iteration_times(records, cfg.dilation)
    all_comm = [v.comm_s for p in result.placements for v in times.get(p.job, {}).values()]
    per_job = _job_summaries(cfg, g, result, records, times)
    return PolicySummary(
        policy=result.policy,
        machines_used=len(machines_used),
        idle_machines_used=sum(1 for m in machines_used if cfg.background.get(m, 0) == 0),
        cluster_machines_in_use=max(c.machines_in_use for c in result.cluster_states),
        fragmented_machines=max(c.fragmented_machines for c in result.cluster_states),
        comm_mean_s=_mean(all_comm),
        comm_p99_s=percentile(all_comm, 99),
        waves=len(result.waves),
        scheduler=result.scheduler,
        preemptions=result.preemptions,
        preemption_overhead_s=result.preemption_overhead_s,
        jct_mean_s=_mean(result.jct_s.values()),
        wall_time_s=result.wall_time_s,
        ecn_marks=_port_marks(result),
        scale=cfg.scale,
        dilation=cfg.dilation,
        measured=_emulated_figures(g, result),
        jobs=tuple(per_job),
        ina=result.ina,
        distribution_efficiency=distribution_efficiency(
            (cfg.iterations, j.compute_mean_s, j.jct_s) for j in per_job),
        backend=backend,
        buckets=tuple(_bucket_comparisons(cfg, result, records, per_job)),
        **completion_figures(per_job),
    )


def _job_summaries(cfg, g, result: PolicyResult, records, times: Mapping[str, Mapping]) -> list[JobSummary]:
    """Every placed job's summary, in placement order, from its iterations' ``times``
    (:func:`measure.iterations.job_iteration_times`), its starts, its marks, the fidelity monitor's
    verdict and the simulator's estimate."""
    job_marks = {}
    for w in result.waves:
        job_marks.update(w.job_marks())
    starts_of: dict[str, list] = {}
    for st in result.starts:
        starts_of.setdefault(st.job, []).append(st.start_s)
    verdicts = {v.job: v for v in result.fidelity.jobs}
    phased: dict[str, list] = {}  # rank 0's records of each job: its time shift as kept
    for r in records:
        if r.rank == 0:
            phased.setdefault(r.job, []).append(r)
    per_job = []
    for p in result.placements:
        job = p.job
        its = times.get(job, {})
        comm = [v.comm_s for v in its.values()]
        spec = next(j for j in cfg.jobs if j.name == job)
        per_job.append(JobSummary(
            job=job, model=spec.model, workers=spec.workers, collective=spec.collective, wave=p.wave,
            machines=tuple(sorted(set(p.machines_by_rank), key=lambda m: g.nodes[m]["index"])),
            iterations_recorded=len(its),
            complete=all(v.ranks == spec.workers for v in its.values()) and len(its) == cfg.iterations,
            comm_mean_s=_mean(comm), comm_p99_s=percentile(comm, 99),
            compute_mean_s=_mean(v.compute_s for v in its.values()),
            ecn_marks=job_marks.get(job),
            jct_s=result.jct_s.get(job),
            measured=_job_figures(verdicts.get(job), result.estimates.get(job), _mean(comm)),
            arrival_s=spec.arrival_s,
            start_s=starts_of[job][0] if starts_of.get(job) else None,
            end_s=spec.arrival_s + result.jct_s[job] if job in result.jct_s else None,
            runs=len(starts_of.get(job, ())),
            iteration_mean_s=_mean(v.comm_s + v.compute_s for v in its.values()),
            **phase_figures(phased.get(job, ()), cfg.dilation)))
    return per_job


def _job_figures(verdict: JobVerdict | None, estimate, comm_mean_s: float | None) -> EmulatedJobFigures | None:
    """The emulator's figures of a job: the fidelity monitor's ``verdict`` on it and the simulator's
    ``estimate`` (:class:`sim.flowsim.JobEstimate`) against its measured ``comm_mean_s`` (None: neither)."""
    if verdict is None and estimate is None:
        return None
    estimate_s = estimate.comm_mean_s if estimate else None
    return EmulatedJobFigures(
        fidelity=verdict.status if verdict else None, bound_s=verdict.bound_s if verdict else None,
        bound_ratio=verdict.ratio if verdict else None,
        contended_with=tuple(verdict.contended_with) if verdict else (),
        estimate_s=estimate_s, estimate_error=_estimate_error(comm_mean_s, estimate_s),
        estimate_ecn_marks=estimate.ecn_marks if estimate else None)


def _bucket_comparisons(cfg, result: PolicyResult, records, jobs: Sequence[JobSummary]) -> list[BucketComparison]:
    """Every bucket of the jobs the validation compares (measured and estimated, with their
    buckets' bytes recorded), measured against the simulator's estimate."""
    measured_buckets = bucket_times_s(records, cfg.dilation)
    recorded_bytes = {r.job: r.bucket_bytes for r in records}
    buckets: list[BucketComparison] = []
    for p, j in zip(result.placements, jobs, strict=True):
        if comparable(j.comm_mean_s, j.emulated.estimate_s) and p.job in recorded_bytes:
            spec = next(s for s in cfg.jobs if s.name == p.job)
            buckets += compare_buckets(result.policy, p.job, job_class(j.emulated.fidelity), p.machines_by_rank,
                                       spec.collective, recorded_bytes[p.job], measured_buckets.get(p.job),
                                       result.estimates[p.job].bucket_comm_s, cfg.mtu, cfg.scale)
    return buckets


def _port_marks(result: PolicyResult) -> int | None:
    """ECN marks at switch egress ports in the measurement windows, over links and waves (None: ECN
    not measured)."""
    if result.ecn.method == "none":
        return None
    return sum(row.window_marks for row in link_rows(result) if row.window_marks is not None)


def _emulated_figures(g, result: PolicyResult) -> EmulatedFigures:
    """The emulator's figures of a policy's network and of itself: cross-machine bytes, the busiest
    link and switch port in their windows, the most-marked link, CPU, and the fidelity monitor's."""
    cross_bytes = sum(b for (u, _), b in result.link_bytes.items() if g.nodes[u]["role"] == "machine")
    busiest = (0.0, None)
    busiest_port = (0.0, None, None)  # the busiest link that leaves a switch port (where marking happens)
    most_marked = (None, None)
    for row in link_rows(result):
        util = row.window_utilisation
        if util is not None and util > busiest[0]:
            busiest = (util, row.name)
        if util is not None and util > busiest_port[0] and g.nodes[row.src]["role"] == "switch":
            busiest_port = (util, row.name, row.window_marks)
        if row.window_marks is not None and (most_marked[1] is None or row.window_marks > most_marked[1]):
            most_marked = (row.name, row.window_marks)
    fid, cpu = result.fidelity, result.cpu_measured
    return EmulatedFigures(
        cross_machine_bytes=cross_bytes,
        busiest_link=busiest[1],
        busiest_link_utilisation=busiest[0],
        cpu_mean=cpu.mean,
        cpu_p95=cpu.p95,
        cpu_saturated=cpu.saturated,
        cpu_switch_thread_p95=cpu.switch_thread_p95,
        ecn_method=result.ecn.method,
        host_tcp=_host_tcp(result.ecn.hosts),
        ecn_busiest_port=busiest_port[1],
        ecn_marks_busiest_port=busiest_port[2] if result.ecn.method != "none" else None,
        ecn_most_marked_link=most_marked[0],
        ecn_most_marked_link_marks=most_marked[1],
        trustworthy=fid.trustworthy,
        fidelity_reasons=tuple(fid.reasons),
        links_checked=fid.links_checked,
        links_failed=len(fid.slow_links),
        link_check_methods=fid.link_checks,
        worst_link_check=fid.worst_link,
        jobs_checked=fid.jobs_checked,
        jobs_failed=fid.jobs_failed,
        worst_job_ratio=_worst_ratio(fid.jobs),
    )


def _estimate_error(measured_s: float | None, estimated_s: float | None) -> float | None:
    """The simulator's relative error on a job's communication time (None where the job cannot be
    compared, :func:`experiment.reporting.validation.comparable`)."""
    return (estimated_s - measured_s) / measured_s if comparable(measured_s, estimated_s) else None


def _job_fidelity(j: JobSummary) -> str:
    """A job's verdict for the table: ok / SLOW / FAST, or why it was not checked."""
    status, contended_with = j.emulated.fidelity, j.emulated.contended_with
    if status in ("slow", "fast"):
        return status.upper()
    if status == "contended":
        return "shares links with " + ",".join(contended_with)
    if status == "collides":
        return "own flows collide (ECMP)"
    if status == "latency-bound":
        shared = "; shares links with " + ",".join(contended_with) if contended_with else ""
        return f"latency-bound (small transfers{shared})"
    return status or "-"


def _worst_ratio(verdicts: Sequence[JobVerdict]) -> float | None:
    """The checked job whose measured/bound ratio is furthest from 1 (None: none checked)."""
    ratios = [v.ratio for v in verdicts if v.checked and v.ratio is not None]
    return max(ratios, key=lambda r: abs(r - 1), default=None)


def _host_tcp(hosts: dict) -> dict[str, int]:
    """How many hosts used each TCP setting, e.g. ``{"cubic, tcp_ecn=1": 16}``."""
    out: dict[str, int] = defaultdict(int)
    for h in hosts.values():
        out[f"{h['congestion_control']}, tcp_ecn={h['tcp_ecn']}"] += 1
    return dict(out)


SUMMARY_COLUMNS = [
    ("policy", "policy", "{}"),
    ("machines_used", "machines", "{}"),
    ("idle_machines_used", "idle used", "{}"),
    ("cluster_machines_in_use", "in use", "{}"),
    ("fragmented_machines", "fragmented", "{}"),
    ("cross_machine_bytes", "cross-machine MB", None),
    ("comm_mean_s", "comm mean s", "{:.3f}"),
    ("comm_p99_s", "comm p99 s", "{:.3f}"),
    ("comm_p90_s", "comm p90 s", "{:.3f}"),
    ("busiest_link_utilisation", "busiest link util", "{:.0%}"),
    ("busiest_link", "busiest link", "{}"),
    ("ecn_marks", "ECN marks", "{:.0f}"),
    ("ecn_marks_busiest_port", "marks busiest port", "{}"),
    ("cpu_mean", "cpu mean", "{:.0%}"),
    ("jobs_checked", "jobs checked", "{}"),
    ("worst_job_ratio", "worst ratio", "{:.3f}"),
    ("trustworthy", "trust", "{}"),
    ("jct_mean_s", "JCT mean s", "{:.3f}"),
    ("jct_p90_s", "JCT p90 s", "{:.3f}"),
    ("makespan_s", "makespan s", "{:.3f}"),
    ("jct_over_duration_mean", "JCT/duration", "{:.3f}"),
]


def _fmt(key, fmt, value) -> str:
    if value is None:
        return "-"
    if key == "cross_machine_bytes":
        return f"{value / 1e6:.2f}"
    if key == "trustworthy":
        return "ok" if value else "FLAGGED"
    return fmt.format(value)


JOB_TABLE_COLUMNS = [
    ("job", "job", "{}"), ("model", "model", "{}"), ("workers", "workers", "{}"), ("collective", "collective", "{}"),
    ("machines", "machines", None), ("wave", "wave", "{}"), ("comm_mean_s", "comm mean s", "{:.3f}"),
    ("comm_p99_s", "comm p99 s", "{:.3f}"), ("bound_s", "bound s", "{:.3f}"), ("bound_ratio", "ratio", "{:.3f}"),
    ("fidelity", "fidelity", None), ("estimate_s", "sim s", "{:.3f}"), ("estimate_error", "sim error", "{:+.1%}"),
    ("ecn_marks", "ECN marks", "{:.0f}"), ("jct_s", "JCT s", "{:.3f}"), ("complete", "complete", None),
]
MAX_JOB_TABLE_ROWS = 30
"""A policy with more jobs gets no job table on the terminal (``jobs.csv`` holds every job)."""


def _job_cell(key: str, fmt, j: JobSummary) -> str:
    if key == "machines":
        return str(len(j.machines))
    if key == "fidelity":
        return _job_fidelity(j)
    if key == "complete":
        return "yes" if j.complete else "NO"
    return _fmt(key, fmt, j.figure(key))


def _measured_columns(columns, items, value) -> tuple[list, list[str]]:
    """The columns of which some item has a value, and the headers of those none has (never the first)."""
    kept = [c for i, c in enumerate(columns) if i == 0 or any(value(c[0], x) is not None for x in items)]
    return kept, [h for k, h, _ in columns if (k, h, _) not in kept]


def summary_tables(summaries: Sequence[PolicySummary], backend: str | None = None,
                   timelines: Mapping[str, Sequence] | None = None) -> str:
    """The terminal report: one row per policy, then one table per policy's jobs (up to
    :data:`MAX_JOB_TABLE_ROWS` jobs). Columns no policy has a figure for are left out and named.
    ``backend``: the name of the back end that ran them (default: the first summary's).
    ``timelines`` (each policy's :class:`experiment.reporting.timeline.UpPhase` s) adds each job's ECN marks
    per iteration under its job table, where they were measured."""
    columns, missing = _measured_columns(SUMMARY_COLUMNS, summaries, lambda k, s: s.figure(k))
    rows = [[_fmt(k, f, s.figure(k)) for k, _, f in columns] for s in summaries]
    what = backend_heading(backend or (summaries[0].backend if summaries else ""))
    parts = [f"Per policy ({what}):", format_table([h for _, h, _ in columns], rows)]
    if missing:
        parts.append(f"  not measured here: {', '.join(missing)}")
    if len(summaries) > 1:
        completion = jct_lines([(s.policy, s.jct_mean_s, s.distribution_efficiency) for s in summaries])
        parts += ["", *completion] if completion else []
    cluster = cluster_lines([(s.policy, s.cluster) for s in summaries])
    parts += ["", *cluster] if cluster else []
    for s in summaries:
        if len(s.jobs) > MAX_JOB_TABLE_ROWS:
            parts += ["", f"Jobs under {s.policy}: {len(s.jobs)} (every job in jobs.csv)"]
        else:
            jcols, _ = _measured_columns(JOB_TABLE_COLUMNS, s.jobs, lambda k, j: j.figure(k))
            jrows = [[_job_cell(k, f, j) for k, _, f in jcols] for j in s.jobs]
            parts += ["", f"Jobs under {s.policy} (times in paper-scale seconds, dilation {s.dilation:g}):",
                      format_table([h for _, h, _ in jcols], jrows)]
            parts += marks_lines((timelines or {}).get(s.policy, ()))
            parts += interleaving_lines(s.policy, (timelines or {}).get(s.policy, ()))
        for reason in s.emulated.fidelity_reasons:
            parts.append(f"  UNTRUSTWORTHY under {s.policy}: {reason}; lighten the emulation (a larger "
                         f"dilation, jumbo frames with mtu: 9000, fewer concurrent workers) or use more cores")
        if s.ina is not None:
            parts += ["", *ina_lines(s)]
        parts += shift_lines(s)
    return "\n".join(parts)


def marks_lines(phases: Sequence) -> list[str]:
    """One line: each job's ECN marks per iteration, the mean over its iterations (none when no
    iteration measured them)."""
    means = mean_marks(phases)
    if not means:
        return []
    jobs = ", ".join(f"{job} {format_marks(m)}" for job, m in sorted(means.items()))
    return [f"  ECN marks per iteration (mean; CE packets the job's ranks received, timeline.csv): {jobs}"]


def interleaving_lines(policy: str, phases: Sequence) -> list[str]:
    """The interleaving table of one policy's jobs that shared links (:mod:`experiment.reporting.interleaving`):
    the overlapped part of their Up phases, first, mean and over the last iterations, and from which
    iteration they interleaved; none when no job shared a link."""
    found = interleaving(phases)
    if not found:
        return []
    rows = [[i.job, f"{i.overlap[0]:.2f}", f"{i.mean:.2f}", f"{sum(i.overlap[-HOLD:]) / len(i.overlap[-HOLD:]):.2f}",
             "-" if i.interleaved_from is None else str(i.interleaved_from), str(len(i.overlap))] for i in found]
    return ["", f"Interleaving under {policy} (the part of each Up phase the jobs sharing its links spend in theirs; "
                f"interleaved: from the first of {HOLD} iterations in a row at most {OVERLAP_THRESHOLD:.0%}):",
            format_table(["job", "overlap first", "mean", f"last {HOLD}", "interleaved from", "iterations"], rows)]


def shift_lines(s: PolicySummary) -> list[str]:
    """The time-shift table of one policy (none when no job was shifted): each shifted job's shift,
    its largest phase error after the first wait against the drift threshold and the iterations
    beyond it, its re-alignments, the pace of its line (wall over profiled time)."""
    shifted = [j for j in s.jobs if j.time_shift_s is not None]
    if not shifted:
        return []
    rows = [[j.job, f"{j.time_shift_s * 1e3:.1f}", _fmt("", "{:.2f}", None if j.phase_error_max_s is None
                                                        else j.phase_error_max_s * 1e3),
             _fmt("", "{:.1f}", None if j.drift_threshold_s is None else j.drift_threshold_s * 1e3),
             _fmt("", "{}", j.phase_errors_beyond), _fmt("", "{}", j.realignments), _fmt("", "{:.3f}", j.pace_stretch),
             {True: "yes", False: "NO", None: "-"}[j.shift_held]]
            for j in shifted]
    held = [j.shift_held for j in shifted if j.shift_held is not None]
    verdict = (f"  the phase of {sum(held)}/{len(held)} shifted jobs stayed within the drift threshold "
               "after the first wait" if held else "  phase errors not measured by this back end")
    return ["", f"Time shifts under {s.policy} (ms; phase error: an iteration's start against its aligned instant):",
            format_table(["job", "shift", "max |phase error|", "threshold", "iterations beyond", "re-alignments",
                          "pace", "held"], rows),
            verdict]


INA_CSV_COLUMNS = ("engine", "ps_host", "leaves", "root", "job_ids", "sent", "resent", "timeouts", "results",
                   "ecn_results", "ps_received", "ps_aggregated", "ps_fallback", "packets_per_ps_packet",
                   "fallback_fraction", "uplink_bytes", "uplink_bytes_unaggregated", "uplink_fraction")
"""``ina.csv``: one row per policy and INA job (client counters summed over its machines; uplink
bytes up its racks' uplinks towards its PS, with INA and unaggregated: :class:`InaJobResult`)."""


def ina_row(ina: InaResult, job: InaJobResult) -> list:
    """One job's ``ina.csv`` values, in :data:`INA_CSV_COLUMNS` order."""
    return [ina.engine, job.ps_host, " ".join(job.leaves), job.root or "", " ".join(map(str, job.job_ids)),
            *(job.client.get(k, 0) for k in ("sent", "resent", "timeouts", "results", "ecn_results")),
            *(job.ps.get(k, 0) for k in ("received", "aggregated", "fallback")),
            job.packets_per_ps_packet, job.fallback_fraction, job.uplink_bytes, job.uplink_bytes_unaggregated,
            job.uplink_fraction]


def ina_lines(s: PolicySummary) -> list[str]:
    """The INA table of one policy: each INA job's packets, where they were summed, fall-backs."""
    ina = s.ina
    if not ina.used:
        return [f"INA under {s.policy}: not used ({ina.why})"]
    totals = {k: sum(c.get(k, 0) for c in ina.aggregators.values()) for k in ("contributions", "aggregates",
                                                                               "collisions", "duplicates")}
    malformed = sum(v for c in ina.aggregators.values() for k, v in c.items() if k.startswith("malformed:"))
    rows = [[name, j.ps_host, " ".join(j.leaves) or "-", j.root or "-", str(j.client.get("sent", 0)),
             str(j.client.get("resent", 0)), str(j.ps.get("received", 0)), str(j.ps.get("fallback", 0)),
             _fmt("", "{:.2f}", j.packets_per_ps_packet), _fmt("", "{:.1%}", j.fallback_fraction),
             f"{j.uplink_bytes / 1e6:.2f}", f"{j.uplink_bytes_unaggregated / 1e6:.2f}",
             _fmt("", "{:.2f}", j.uplink_fraction)]
            for name, j in ina.jobs.items()]
    return [f"INA under {s.policy} ({ina.engine} aggregators, {ina.slots} slots; {ina.why}):",
            format_table(["job", "PS", "leaves", "root", "sent", "resent", "at PS", "fell back", "sent/at PS",
                          "fallback", "uplink MB", "unaggr. MB", "uplink/unaggr."], rows),
            f"  aggregators: {totals['contributions']} packets summed, {totals['aggregates']} aggregates sent on, "
            f"{totals['collisions']} collisions, {totals['duplicates']} duplicates, {malformed} malformed dropped",
            "  uplink MB: its packets up its racks' uplinks towards its PS, as the ToRs' aggregators counted them; "
            "unaggr.: the same workers' packets unsummed",
            *(["  INA processes' busiest thread, 95th percentile of one core while measured: "
               + ", ".join(f"{name} {share:.0%}" for name, share in ina.cpu.items())] if ina.cpu else [])]


SUMMARY_CSV_COLUMNS = (
    "policy", "backend", "machines_used", "idle_machines_used", "cluster_machines_in_use", "fragmented_machines",
    "cross_machine_bytes", "comm_mean_s", "comm_p99_s", "comm_p90_s", "busiest_link_utilisation", "busiest_link",
    "ecn_marks", "ecn_marks_busiest_port", "cpu_mean", "jobs_checked", "worst_job_ratio", "trustworthy", "scale",
    "dilation", "jobs_failed", "waves", "scheduler", "preemptions", "preemption_overhead_s", "jct_mean_s",
    "jct_p90_s", "makespan_s", "jct_over_duration_mean", "distribution_efficiency", "wall_time_s", "cpu_saturated",
    "ecn_method", "ecn_busiest_port", "ecn_most_marked_link", "ecn_most_marked_link_marks")
"""``summary.csv``: a row per policy, from either back end (empty: not measured by that back end)."""

JOB_CSV_COLUMNS = (
    "policy", "job", "model", "workers", "collective", "arrival_s", "start_s", "end_s", "jct_s", "runs", "wave",
    "iterations_recorded", "complete", "comm_mean_s", "comm_p99_s", "compute_mean_s", "iteration_mean_s",
    "ecn_marks", "duration_s", "bound_s", "bound_ratio", "fidelity", "estimate_s", "estimate_error",
    "estimate_ecn_marks", "machines", "contended_with", "time_shift_s", "phase_error_max_s", "phase_errors_beyond",
    "drift_threshold_s", "realignments", "pace_stretch")
"""``jobs.csv``: a row per policy and job, from either back end (empty: not measured by that back end)."""

def backend_heading(name: str) -> str:
    """How the tables name the back end called ``name``: its class's
    :meth:`~experiment.run.plugin.ExperimentBackend.report_heading`, or the name for one not registered here."""
    from experiment import saved_backend_class

    cls = saved_backend_class(name)
    return name if cls is None else cls.report_heading()


def _cell(value):
    """A CSV cell: empty for None, space-joined for sequences."""
    if value is None:
        return ""
    if isinstance(value, (tuple, list)):
        return " ".join(map(str, value))
    return value


def write_summary_csvs(run_dir: str, summaries: Sequence[PolicySummary]) -> None:
    """``summary.csv`` and ``jobs.csv``: the same columns whichever back end ran."""
    with open(os.path.join(run_dir, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(SUMMARY_CSV_COLUMNS)
        for s in summaries:
            w.writerow([_cell(s.figure(k)) for k in SUMMARY_CSV_COLUMNS])
    with open(os.path.join(run_dir, "jobs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(JOB_CSV_COLUMNS)
        for s in summaries:
            for j in s.jobs:
                w.writerow([s.policy, *(_cell(j.figure(c)) for c in JOB_CSV_COLUMNS[1:])])


def write_run_report(run_dir: str, cfg, g, runs: dict, caps: dict, stream, unplaced: dict | None = None) -> None:
    """Write summary.json, summary.csv, jobs.csv, link_bytes.csv, link_checks.csv, report.txt and plots;
    print tables. ``runs`` maps each policy that finished to its :class:`experiment.reporting.summary.PolicyRun`
    (the emulator's also hold its per-link and per-port measurements); ``unplaced`` maps policies
    that could not place every job to the reason."""
    unplaced = unplaced or {}
    summaries = [r.summary for r in runs.values()]
    measured = {spec: r.measurements for spec, r in runs.items() if r.measurements is not None}
    comparisons = all_comparisons(summaries)
    overall, by_class = validation_stats(comparisons), stats_by_class(comparisons)
    marks = all_mark_comparisons(summaries)
    buckets = [b for s in summaries for b in s.buckets]
    split = error_split(buckets)
    write_json_atomic(os.path.join(run_dir, "summary.json"),
                      {"name": cfg.name, "backend": caps.get("backend"), "scale": cfg.scale,
                       "dilation": cfg.dilation, "capabilities": caps, "policies": [s.to_dict() for s in summaries],
                       "unplaced": unplaced, "validation": overall.to_dict(),
                       "validation_by_class": {cls: st.to_dict() for cls, st in by_class.items()},
                       "validation_by_bucket": {cls or "unclassed": sp.to_dict() for cls, sp in split.items()},
                       "validation_ecn": marks_to_dict(marks)})
    write_summary_csvs(run_dir, summaries)
    if buckets:
        write_buckets_csv(os.path.join(run_dir, "buckets.csv"), buckets)
    if any(s.ina is not None for s in summaries):
        with open(os.path.join(run_dir, "ina.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["policy", "job", *INA_CSV_COLUMNS])
            for s in summaries:
                for name, job in (s.ina.jobs.items() if s.ina is not None else ()):
                    w.writerow([s.policy, name, *("" if v is None else v for v in ina_row(s.ina, job))])
    with open(os.path.join(run_dir, "link_bytes.csv"), "w", newline="") as f:
        w = csv.writer(f)
        cols = [f.name for f in dataclasses.fields(LinkRow)]
        w.writerow(["policy", *cols])
        for spec, r in measured.items():
            for row in link_rows(r):
                w.writerow([spec, *("" if getattr(row, c) is None else getattr(row, c) for c in cols)])
    with open(os.path.join(run_dir, "link_checks.csv"), "w", newline="") as f:
        w = csv.writer(f)
        cols = ["link", "check", "ok", "limit_ratio", "rate_mbps", "samples", "max_lag_bytes", "excess_bytes",
                "limit_bytes", "busy_s", "achieved_mbps", "ratio"]
        w.writerow(["policy", *cols])
        for spec, r in measured.items():
            for row in r.fidelity.links:
                w.writerow([spec, *("" if getattr(row, c) is None else getattr(row, c) for c in cols)])
    timelines = {r.summary.policy: r.timeline for r in runs.values()}
    text = report_text(summaries, caps.get("backend"), timelines, bool(measured), unplaced)
    with open(os.path.join(run_dir, "report.txt"), "w") as f:
        f.write(text + "\n")
    plots = summary_plots(run_dir, summaries, timelines) if cfg.plots else []
    if measured:
        plots += write_queue_report(run_dir, measured, cfg.plots)
    plots += write_file_plots(run_dir) if cfg.plots else []
    print("\n" + text, file=stream)
    files = ["summary.json", "summary.csv", "jobs.csv", "link_bytes.csv", "link_checks.csv", "report.txt"]
    files += ["queues.csv"] if measured else []
    files += ["buckets.csv"] if buckets else []
    files += ["ina.csv"] if any(s.ina is not None for s in summaries) else []
    print(f"\nresults: {run_dir} ({', '.join(files + [os.path.basename(p) for p in plots])})", file=stream,
          flush=True)
    if measured and cfg.plots and not any(os.path.basename(p) == "queues.png" for p in plots):
        print("queues: no switch port held a backlog in any policy's samples, so queues.png is not drawn",
              file=stream, flush=True)
    if not cfg.plots:
        print(f"plots: not drawn (plots: false); python3 run_testbed.py report {run_dir} draws them", file=stream,
              flush=True)


def report_text(summaries: Sequence[PolicySummary], backend: str | None, timelines: Mapping[str, Sequence],
                measured: bool, unplaced: Mapping[str, str]) -> str:
    """``report.txt``: the summary tables, the simulator's validation against the measurements (when
    the emulator measured), and the policies that could not place every job."""
    text = summary_tables(summaries, backend, timelines)
    if measured:
        comparisons = all_comparisons(summaries)
        split = error_split([b for s in summaries for b in s.buckets])
        text += "\n\n" + validation_text(summaries, validation_stats(comparisons), stats_by_class(comparisons), split,
                                         all_mark_comparisons(summaries))
    for spec, why in unplaced.items():
        text += f"\n\nPolicy {spec} could not place every job: {why}"
    return text


def summary_plots(run_dir: str, summaries: Sequence[PolicySummary], timelines: Mapping[str, Sequence]) -> list[str]:
    """The plots drawn from the summaries and timelines alone: ``policies.png``, the validation and
    bucket plots, ``timelines.png``. Returns the PNG paths."""
    buckets = [b for s in summaries for b in s.buckets]
    plots = write_plots(run_dir, summaries)
    plots += write_validation_plot(run_dir, summaries, validation_stats(all_comparisons(summaries)))
    plots += write_buckets_plot(run_dir, buckets)
    plots += plot_timelines(run_dir, timelines)
    return plots


def write_plots(run_dir: str, summaries: Sequence[PolicySummary]) -> list[str]:
    """Bar charts of communication time, cross-machine traffic, busiest-link utilisation and ECN marks
    per policy (policies without ECN measurement are labelled, not drawn as zero). Returns the PNG paths."""
    if not summaries:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s.policy for s in summaries]
    x = range(len(names))

    def has(attr: str) -> bool:
        return any(s.figure(attr) is not None for s in summaries)

    panels = [_plot_comm]
    panels += [_plot_jct] if has("jct_mean_s") else []
    panels += [_plot_cross_bytes] if has("cross_machine_bytes") else []
    panels += [_plot_busiest] if has("busiest_link_utilisation") else []
    panels += [_plot_ecn] if has("ecn_method") else []
    panels += [_plot_job_ratios] if any(j.emulated.bound_ratio is not None for s in summaries for j in s.jobs) else []
    panels += [_plot_ina] if any(s.ina is not None for s in summaries) else []
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 1, 4), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        panel(ax, summaries)
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=20, ha="right")
    flagged = [s.policy for s in summaries if s.emulated.trustworthy is False]
    if flagged:
        fig.suptitle("flagged by the fidelity monitor (timings may reflect the emulator): " + ", ".join(flagged),
                     fontsize=9, color="tab:red")
    fig.tight_layout()
    path = os.path.join(run_dir, "policies.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def _plot_comm(ax, summaries: Sequence[PolicySummary]) -> None:
    """Mean (and, where measured per iteration, 99th percentile) communication time per policy."""
    x = range(len(summaries))
    ax.bar([i - 0.2 for i in x], [s.comm_mean_s or 0 for s in summaries], 0.4, label="mean")
    ax.bar([i + 0.2 for i in x], [s.comm_p99_s or 0 for s in summaries], 0.4, label="p99")
    ax.set_ylabel("communication time per iteration (s)")
    ax.legend()


def _plot_jct(ax, summaries: Sequence[PolicySummary]) -> None:
    """Mean job completion time per policy."""
    ax.bar(range(len(summaries)), [s.jct_mean_s or 0 for s in summaries], color="#4c72b0")
    ax.set_ylabel("mean JCT (s)")


def _plot_cross_bytes(ax, summaries: Sequence[PolicySummary]) -> None:
    """Bytes that left machines onto the fabric per policy."""
    ax.bar(range(len(summaries)), [(s.emulated.cross_machine_bytes or 0) / 1e6 for s in summaries],
           color="tab:orange")
    ax.set_ylabel("cross-machine traffic (MB, emulated)")


def _plot_busiest(ax, summaries: Sequence[PolicySummary]) -> None:
    """Utilisation of the busiest link per policy."""
    ax.bar(range(len(summaries)), [100 * (s.emulated.busiest_link_utilisation or 0) for s in summaries],
           color="tab:green")
    ax.set_ylabel("busiest-link utilisation (%)")


def _plot_ecn(ax, summaries: Sequence[PolicySummary]) -> None:
    """ECN marks per policy; a policy whose marks were not measured is labelled, not drawn as zero."""
    ax.bar(range(len(summaries)), [s.ecn_marks or 0 for s in summaries], color="tab:red")
    for i, s in enumerate(summaries):
        if s.ecn_marks is None:
            ax.text(i, 0, "not\nmeasured", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("ECN-marked packets (measurement windows)")


def _plot_ina(ax, summaries: Sequence[PolicySummary]) -> None:
    """INA bars: worker packets per packet reaching the PS per policy (1: nothing summed in the
    network); policies where INA was not used or reached no PS are labelled, not drawn."""
    x = range(len(summaries))
    values = [s.ina_packets_per_ps_packet for s in summaries]
    ax.bar(x, [v or 0 for v in values], color="tab:purple")
    for i, (s, v) in enumerate(zip(summaries, values, strict=True)):
        if v is None:
            why = "INA not\nused" if s.ina is not None and not s.ina.used else "no INA\nmeasured"
            ax.text(i, 0, why, ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_ylabel("INA: worker packets per packet at the PS")


def write_buckets_csv(path: str, buckets: Sequence[BucketComparison]) -> None:
    """``buckets.csv``: a row per policy, job and bucket, measured against the simulator's estimate."""
    cols = list(buckets[0].to_dict())
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for b in buckets:
            row = b.to_dict()
            w.writerow(["" if row[c] is None else row[c] for c in cols])


def validation_text(summaries: Sequence[PolicySummary], overall, by_class, split,
                    marks: Sequence[MarksComparison] = ()) -> str:
    """The simulator-against-measurement lines: every policy's, then all jobs together (``overall``)
    and each class of job (``by_class``, :func:`experiment.reporting.validation.stats_by_class`), with where its
    error lies bucket by bucket (``split``, :func:`experiment.reporting.breakdown.error_split`); then the ECN
    marks (``marks``, with the simulator's ``ecn`` estimate) over all jobs and per class."""
    lines = ["Flow-level simulator against the measurements (per-job communication time per iteration, "
             "same placements; experiment.reporting.validation):"]
    for s in summaries:
        lines.append(f"  {s.policy:<12} {s.validation.line()}")
    lines.append(f"  {'all':<12} {overall.line()}")
    for cls, st in by_class.items():
        lines.append(f"    {cls:<14} {st.line()}")
        if cls in split:
            lines.append(f"    {'':<14} by bucket: {split[cls].line()}")
    lines += marks_validation_lines(marks)
    if overall.worst is not None:
        w = overall.worst
        lines.append(f"  worst: {w.job} under {w.policy}: measured {w.measured_s:.4g} s, estimated "
                     f"{w.estimated_s:.4g} s ({w.rel_error:+.1%})")
    return "\n".join(lines)


def write_validation_plot(run_dir: str, summaries: Sequence[PolicySummary], overall) -> list[str]:
    """``validation.png``: estimated against measured communication time of every comparable job,
    one colour per policy, with the line of perfect agreement; and per policy, the mean over its
    comparable jobs of each. Returns the paths written."""
    comparisons = all_comparisons(summaries)
    if not comparisons:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, by_policy) = plt.subplots(1, 2, figsize=(12, 5.6), gridspec_kw={"width_ratios": [1, 1.1]})
    means = []
    for i, s in enumerate(summaries):
        cs = [c for c in comparisons if c.policy == s.policy]
        if cs:
            ax.scatter([c.measured_s for c in cs], [c.estimated_s for c in cs], s=28, color=f"C{i % 10}",
                       label=s.policy)
            means.append((s.policy, sum(c.measured_s for c in cs) / len(cs), sum(c.estimated_s for c in cs) / len(cs)))
    x = range(len(means))
    by_policy.bar([i - 0.2 for i in x], [m for _, m, _ in means], 0.4, label="testbed (measured)")
    by_policy.bar([i + 0.2 for i in x], [e for _, _, e in means], 0.4, label="simulator (estimated)")
    by_policy.set_xticks(list(x), [p for p, _, _ in means], rotation=20, ha="right", fontsize=8)
    by_policy.set_ylabel("mean communication time per iteration of its comparable jobs (s)", fontsize=8)
    by_policy.set_title("per policy", fontsize=9)
    by_policy.legend(fontsize=8)
    hi = max(max(c.measured_s, c.estimated_s) for c in comparisons) * 1.1
    ax.plot([0, hi], [0, hi], color="0.5", lw=0.8)
    ax.set_xlim(0, hi)
    ax.set_ylim(0, hi)
    ax.set_xlabel("measured communication time per iteration (s, paper scale)")
    ax.set_ylabel("simulator estimate (s)")
    ax.set_title(f"flow-level simulator vs testbed: {overall.line()}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(run_dir, "validation.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def write_buckets_plot(run_dir: str, buckets: Sequence[BucketComparison]) -> list[str]:
    """``buckets.png``: estimated against measured time of every bucket of the compared jobs, one panel
    per class of job, small and large buckets apart (:mod:`experiment.reporting.breakdown`), log-log with the line
    of perfect agreement: where the estimates part from the measurements. Returns the paths written."""
    classes = list(dict.fromkeys(b.job_class for b in buckets if b.measured_s > 0 and b.estimated_s > 0))
    if not classes:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(classes), figsize=(4.6 * len(classes), 4.6), squeeze=False)
    for ax, cls in zip(axes[0], classes, strict=True):
        shown = [b for b in buckets if b.job_class == cls and b.measured_s > 0 and b.estimated_s > 0]
        for kind, colour in (("small", "C1"), ("large", "C0")):
            bs = [b for b in shown if b.kind == kind]
            if bs:
                ax.scatter([b.measured_s for b in bs], [b.estimated_s for b in bs], s=14, color=colour, alpha=0.7,
                           label=f"{kind} buckets ({len(bs)})")
        lo = min(min(b.measured_s, b.estimated_s) for b in shown) / 1.5
        hi = max(max(b.measured_s, b.estimated_s) for b in shown) * 1.5
        ax.plot([lo, hi], [lo, hi], color="0.5", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_title(f"{cls or 'no verdict'}: {len({(b.policy, b.job) for b in shown})} jobs", fontsize=9)
        ax.set_xlabel("measured per bucket (s, paper scale)")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("simulator estimate per bucket (s)")
    fig.tight_layout()
    path = os.path.join(run_dir, "buckets.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def _plot_job_ratios(ax, summaries: Sequence[PolicySummary]) -> None:
    """Measured / bound of every job per policy: checked jobs as dots (red outside the band the
    fidelity monitor accepts), jobs that shared links or sent nothing as grey crosses."""
    from measure.fidelity import CHECKED_STATUSES, MAX_JOB_RATIO, MIN_JOB_RATIO

    for i, s in enumerate(summaries):
        for j in s.jobs:
            ratio, status = j.emulated.bound_ratio, j.emulated.fidelity
            if ratio is None:
                continue
            checked = status in CHECKED_STATUSES
            color = "tab:green" if status == "ok" else ("tab:red" if checked else "0.6")
            ax.plot(i, ratio, "o" if checked else "x", color=color, ms=6)
    ax.axhspan(MIN_JOB_RATIO, MAX_JOB_RATIO, color="tab:green", alpha=0.1, zorder=0)
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.set_ylabel("job comm time / contention-free bound")
    ax.set_title("dots: jobs with their links to themselves (checked);\ncrosses: jobs sharing links or colliding "
                 "with themselves", fontsize=8)


BUSIEST_PORTS = 3


def busiest_ports(samples: dict, n: int = BUSIEST_PORTS) -> list:
    """The ``n`` directed links whose switch port queued the most (mean backlog over the samples)."""
    def mean_backlog(rows):
        return sum(r.get("backlog_bytes") or 0 for r in rows) / max(1, len(rows))

    ranked = sorted(samples, key=lambda link: (-mean_backlog(samples[link]), link))
    return [link for link in ranked[:n] if mean_backlog(samples[link]) > 0]


def write_queue_report(run_dir: str, results: dict[str, PolicyResult], plot: bool = True) -> list[str]:
    """``queues.csv`` (backlog samples of each policy's busiest ports) and, with ``plot``, ``queues.png``.
    Returns the PNGs."""
    from measure.linkstats import read_queue_samples

    chosen = {}
    for spec, r in results.items():
        has = r.dir and r.queue_stats
        samples = read_queue_samples(os.path.join(r.dir, r.queue_stats)) if has else {}
        chosen[spec] = {link: samples[link] for link in busiest_ports(samples)}
    with open(os.path.join(run_dir, "queues.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["policy", "t_s", "src", "dst", "backlog_bytes", "backlog_pkts", "drops", "marks",
                    "virtual_backlog_us"])
        for spec, links in chosen.items():
            t0 = min((rows[0]["t"] for rows in links.values()), default=0.0)
            for (u, v), rows in links.items():
                for row in rows:
                    vq = row.get("vq_backlog_ns")
                    w.writerow([spec, round(row["t"] - t0, 3), u, v, row.get("backlog_bytes"), row.get("backlog_pkts"),
                                row.get("drops"), row.get("marks"), "" if vq is None else round(vq / 1e3, 1)])
    chosen = {spec: links for spec, links in chosen.items() if links}
    if not chosen or not plot:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(chosen), 1, figsize=(10, 2.4 * len(chosen)), squeeze=False)
    for ax, (spec, links) in zip(axes[:, 0], chosen.items(), strict=True):
        t0 = min(rows[0]["t"] for rows in links.values())
        for (u, v), rows in links.items():
            ax.plot([r["t"] - t0 for r in rows], [(r.get("backlog_bytes") or 0) / 1e3 for r in rows],
                    label=f"{u}->{v}", lw=1)
        for w in results[spec].waves:
            if w.window_s:
                ax.axvspan(w.window_s[0] - t0, w.window_s[1] - t0, color="0.9", zorder=0)
        ax.set_title(f"{spec}: queue backlog of the busiest ports (shaded: measurement windows)", fontsize=9)
        ax.set_ylabel("backlog (kB)")
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("time since the policy's network started (s)")
    fig.tight_layout()
    path = os.path.join(run_dir, "queues.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return [path]

