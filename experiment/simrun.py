"""An experiment config on the simulator back end: every policy through the loop, no root needed.

``run_testbed.py --backend sim`` runs this. For each policy the experiment loop
(:mod:`experiment.loop`) places and schedules the config's jobs as on the emulator, and
:class:`sim.backend.FlowSimBackend` runs them: the same topology, routes (ECMP), collectives,
scaled gradient buckets and compute times, with rates max-min shared as the config's
``simulator`` section says. It writes ``results/<timestamp>-<name>/``:

* ``config.json``, ``topology.json``, ``status.json`` and ``capabilities.json`` (``backend: sim``);
* ``<policy>/placements.json`` and ``<policy>/jobs.json``: each job's starts and placements,
  finish, JCT and its communication, compute and iteration times (means over its measured
  iterations, slowest rank per iteration, as the emulator's report aggregates them);
* ``sim_jobs.csv`` (a row per policy and job), ``sim_policies.json`` (per policy: mean and p90
  communication time, mean JCT, makespan) and ``sim_policies.png``;

and prints one table per run. The rows and summaries are the typed records of
:mod:`experiment.simsummary`, written through their ``to_dict``. Times are virtual (paper-scale) seconds.
"""

from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence

from common.errors import PlacementError
from common.jsonfile import write_json_atomic
from common.specs import safe_name
from common.units import BITS_PER_BYTE, MEGA, scale_bw_mbps
from experiment import results
from experiment.efficiency import jct_lines
from experiment.loop import LoopResult
from experiment.run import experiment_jobs, place_and_run
from experiment.simsummary import (
    JOB_COLUMNS,
    SimJobRow,
    SimJobStart,
    SimPolicyError,
    SimPolicyOutcome,
    SimPolicySummary,
    policy_summary,
)
from jobs.patterns import INA
from sim.backend import FlowSimBackend, FluidSimBackend
from sim.flowsim import JobEstimate, SimOptions

ENGINES = {"steps": FlowSimBackend, "fluid": FluidSimBackend}
"""``simulator.mode`` -> the simulator back end that runs it."""


def sim_rates_mbps(g, scale: float, dilation: float = 1.0) -> dict[tuple[str, str], float]:
    """Every link's rate at the scale (and dilation), Mbit/s: paper rate / (scale x dilation)."""
    return {(u, v): scale_bw_mbps(float(d["bw_mbps"]), scale * dilation) for u, v, d in g.edges(data=True)}


def sim_options(cfg, g) -> SimOptions:
    """What the simulator models, from the config's ``simulator`` section (headers at the MTU,
    per-message latency in virtual seconds, the emulated shapers' token buckets) and its ``ina``
    one (every switch's PAT at the scale, how results come back)."""
    from measure.shaping import burst_bytes

    bursts = None
    if cfg.simulator.token_buckets:  # each shaper's depth at its shaped (dilated) rate, as the emulator sets it
        bursts = {link: burst_bytes(r, cfg.mtu) for link, r in sim_rates_mbps(g, cfg.scale, cfg.dilation).items()}
    pat = scale_bw_mbps(cfg.ina.pat_gbps * 1000.0, cfg.scale) * MEGA / BITS_PER_BYTE
    return SimOptions(mtu=cfg.mtu if cfg.simulator.headers else None, latency_s=cfg.simulator.latency_us * 1e-6,
                      burst_bytes=bursts, ecn=cfg.simulator.ecn, pat_bytes_s=pat, ina_results=cfg.ina.results)


def sim_backend(cfg, g, bucket_bytes: Mapping[str, Sequence[int]] | None = None) -> FlowSimBackend:
    """A fresh simulator back end for config ``cfg`` on topology ``g``: the links' rates at the scale,
    the config's warm-up and ``simulator`` options (``bucket_bytes``: as :class:`FlowSimBackend`)."""
    from experiment.config import ina_switches

    return ENGINES[cfg.simulator.mode](g, sim_rates_mbps(g, cfg.scale), cfg.scale, cfg.warmup_iterations,
                                       sim_options(cfg, g), bucket_bytes=bucket_bytes,
                                       ina_switches=ina_switches(cfg, g))


def replay_on_simulator(cfg, g, loop: LoopResult, bucket_bytes: Mapping[str, Sequence[int]] | None = None
                        ) -> dict[str, JobEstimate]:
    """The simulator's estimate of every job of a run, replaying the run's schedule.

    Every start of ``loop`` (a run on another back end, the emulator's say) is made at its time
    on its placement and every preemption at its time; each job's last run then ends when the
    simulator says. A preemption of a job the simulator has already finished is void, and so
    is a later start of it. The starts' times are the loop's, before the emulator's start-up
    (its ranks joining), so a simulated job starts that much earlier. With ``bucket_bytes``,
    jobs allreduce those buckets (the run's measured ones) instead of their models'.

    Jobs of collective ``ina`` are simulated by the fluid engine (:mod:`sim.ina`); the step-level
    one does not model in-network aggregation, so there they are left out and the jobs beside them
    are estimated without their traffic.

    Returns:
        The estimate of every job that completed an iteration in the simulator.
    """
    backend = sim_backend(cfg, g, bucket_bytes)
    jobs = {j.name: j for j in experiment_jobs(cfg, g) if j.collective != INA or cfg.simulator.mode == "fluid"}
    events = sorted([(st.time_s, 1, i, st.job, st.placement) for i, st in enumerate(loop.starts)]
                    + [(r.end_s, 0, i, r.job, None) for i, r in enumerate(loop.runs) if not r.finished],
                    key=lambda e: e[:3])
    running: set[str] = set()

    def run_until(t: float) -> None:
        while running and backend.now_s < t:
            for end in backend.advance(t):
                running.discard(end.job)
        if backend.now_s < t:
            backend.advance(t)

    for t, kind, _, name, placement in events:
        if name not in jobs:
            continue
        run_until(t)
        if kind == 0:
            if name in running:
                backend.stop(name)
                running.discard(name)
        elif name not in running and backend.done.get(name, 0) < jobs[name].iterations:
            backend.start([(jobs[name], placement)])
            running.add(name)
    while running:
        for end in backend.advance(math.inf):
            running.discard(end.job)
    return {name: backend.estimate(name) for name in jobs if backend.done.get(name)}


def run_policy_sim(cfg, g, spec: str, say: Callable[[str], None] | None = None) -> list[SimJobRow]:
    """Run policy ``spec`` on a fresh simulator; one row per job, in the config's order. With ``say``,
    a progress line every tenth of the jobs finished (and every minute of wall time at most)."""
    backend = sim_backend(cfg, g)
    jobs = experiment_jobs(cfg, g)
    loop = place_and_run(cfg, g, spec, backend, on_event=_progress(len(jobs), say) if say else None)
    starts_of: dict[str, list] = {}
    for st in loop.starts:
        starts_of.setdefault(st.job, []).append(st)
    runs_of: dict[str, list] = {}
    for run in loop.runs:
        runs_of.setdefault(run.job, []).append(run)
    rows = []
    for j in jobs:
        starts, runs = starts_of[j.name], runs_of[j.name]
        est = backend.estimate(j.name)
        rows.append(SimJobRow(
            policy=spec, job=j.name, model=j.model, workers=j.workers, collective=j.collective,
            arrival_s=j.arrival_s, start_s=starts[0].time_s, end_s=runs[-1].end_s, jct_s=loop.jct_s[j.name],
            runs=len(runs), comm_mean_s=est.comm_mean_s, compute_mean_s=est.compute_mean_s,
            iteration_mean_s=est.iteration_mean_s, iterations=est.iterations, ecn_marks=est.ecn_marks,
            duration_s=j.duration_s, machines=tuple(starts[-1].placement.machines),
            placements=tuple(SimJobStart(s.time_s, s.placement) for s in starts)))
    return rows


def _progress(total: int, say: Callable[[str], None]) -> Callable:
    """An ``on_event`` for the loop that says how many of ``total`` jobs have finished, every tenth
    of them or every minute of wall time, whichever comes first."""
    state = {"done": 0, "said": 0, "at": time.monotonic()}

    def on_event(event) -> None:
        if event.kind != "finished":
            return
        state["done"] += 1
        now = time.monotonic()
        if state["done"] - state["said"] >= max(1, total // 10) or now - state["at"] >= 60:
            state["said"], state["at"] = state["done"], now
            say(f"    {state['done']}/{total} jobs finished (simulated time {event.time_s:,.0f} s)")
    return on_event


def run_simulated(cfg, g, run_dir: str, specs: list[str], say: Callable[[str], None] = print
                  ) -> dict[str, SimPolicyOutcome]:
    """Every policy of ``specs`` on the simulator; results in ``run_dir``. Returns the summary per
    policy; a policy that cannot place every job is reported and skipped (a :class:`SimPolicyError`)."""
    source = f"trace {cfg.trace.file}" if cfg.trace.file else f"{len(cfg.jobs)} jobs"
    say(f"run {run_dir}: {source}, {len(specs)} policies on the flow-level simulator ({cfg.simulator.mode} mode, "
        f"scale {cfg.scale:g}, scheduler {cfg.scheduler}); times in paper-scale seconds")
    all_rows: list[SimJobRow] = []
    summaries: dict[str, SimPolicyOutcome] = {}
    for i, spec in enumerate(specs, 1):
        t0 = time.monotonic()
        pdir = os.path.join(run_dir, safe_name(spec))
        os.makedirs(pdir, exist_ok=True)
        try:
            rows = run_policy_sim(cfg, g, spec, say if cfg.trace.file else None)
        except PlacementError as e:
            summaries[spec] = SimPolicyError(spec, str(e))
            say(f"[{i}/{len(specs)}] {spec}: stopped: {e}")
            continue
        write_json_atomic(os.path.join(pdir, "placements.json"), [p.to_dict() for r in rows for p in r.placements])
        write_json_atomic(os.path.join(pdir, "jobs.json"), [r.to_dict() for r in rows])
        all_rows += rows
        summaries[spec] = policy_summary(spec, rows)
        say(f"[{i}/{len(specs)}] {spec}: {len(rows)} jobs simulated in {time.monotonic() - t0:.1f} s")
    with open(os.path.join(run_dir, "sim_jobs.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=JOB_COLUMNS)
        w.writeheader()
        w.writerows(r.csv_row() for r in all_rows)
    write_json_atomic(os.path.join(run_dir, "sim_policies.json"), {spec: s.to_dict() for spec, s in summaries.items()})
    for line in table_lines(summaries):
        say(line)
    path = plot_policies(summaries, os.path.join(run_dir, "sim_policies.png"))
    say(f"written: {run_dir}/sim_jobs.csv, sim_policies.json" + (", sim_policies.png" if path else ""))
    return summaries


def table_lines(summaries: Mapping[str, SimPolicyOutcome]) -> list[str]:
    """The per-policy table printed at the end of a simulated run (JCT / duration with a trace)."""
    def cell(v, width):
        return f"{'-' if v is None else f'{v:.3f}':>{width}}"

    stretch = any(isinstance(s, SimPolicySummary) and s.jct_over_duration_mean is not None
                  for s in summaries.values())
    out = [f"{'policy':<28} {'comm mean s':>12} {'comm p90 s':>11} {'JCT mean s':>13} {'JCT p90 s':>13} "
           f"{'makespan s':>13}" + (f" {'JCT/duration':>12}" if stretch else "")]
    for spec, s in summaries.items():
        if isinstance(s, SimPolicyError):
            out.append(f"{spec:<28} could not place every job: {s.error}")
        else:
            out.append(f"{spec:<28} {cell(s.comm_mean_s, 12)} {cell(s.comm_p90_s, 11)} "
                       f"{cell(s.jct_mean_s, 13)} {cell(s.jct_p90_s, 13)} {cell(s.makespan_s, 13)}"
                       + (f" {cell(s.jct_over_duration_mean, 12)}" if stretch else ""))
    done = [(spec, s.jct_mean_s, s.distribution_efficiency) for spec, s in summaries.items()
            if isinstance(s, SimPolicySummary)]
    if len(done) > 1:
        out += ["", *jct_lines(done)]
    return out


def plot_policies(summaries: Mapping[str, SimPolicyOutcome], path: str) -> str | None:
    """Bars of mean communication time and mean JCT per policy; the path, or None with nothing to plot."""
    ok = {k: v for k, v in summaries.items() if isinstance(v, SimPolicySummary) and v.comm_mean_s is not None}
    if not ok:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(max(6.0, 1.1 * len(ok) + 3), 3.6))
    names = list(ok)
    for ax, values, title in ((axes[0], [ok[n].comm_mean_s for n in names], "communication per iteration (s)"),
                              (axes[1], [ok[n].jct_mean_s for n in names], "mean JCT (s)")):
        ax.bar(range(len(names)), values, color="#4c72b0")
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_title(title, fontsize=9)
    fig.suptitle("flow-level simulator, per policy", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_simulated_experiment(cfg, run_dir: str | None = None, policies: list[str] | None = None,
                             say: Callable[[str], None] = print) -> str:
    """Validate ``cfg`` for the simulator, run every policy (:func:`run_simulated`) into a new run
    directory (or ``run_dir``) and return its path.

    Raises:
        ConfigError: the config is invalid.
        PolicyIncomplete: some policy could not place every job (the others' results are written).
    """
    from experiment.config import policy_specs, to_dict, validate
    from topo.io import write_topology_json

    g = validate(cfg, backend="sim")
    run_dir = run_dir or results.make_run_dir(cfg.name, cfg.results_dir)
    os.makedirs(run_dir, exist_ok=True)
    results.write_status(run_dir, "running")
    try:
        results.write_json(os.path.join(run_dir, "config.json"), to_dict(cfg))
        results.write_json(os.path.join(run_dir, "capabilities.json"),
                           {"backend": "sim", "engine": cfg.simulator.mode})
        write_topology_json(g, os.path.join(run_dir, "topology.json"))
        specs = policies or policy_specs(cfg)
        summaries = run_simulated(cfg, g, run_dir, specs, say)
    except KeyboardInterrupt:
        results.write_status(run_dir, "interrupted")
        raise
    except BaseException as e:
        results.write_status(run_dir, "failed", f"{type(e).__name__}: {e}")
        raise
    results.finish(run_dir, [spec for spec, s in summaries.items() if isinstance(s, SimPolicyError)], len(specs))
    return run_dir
