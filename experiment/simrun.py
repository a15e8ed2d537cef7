"""The simulator back end of the experiment driver: every policy through the loop, no root needed.

``run_testbed.py --backend sim`` runs :class:`SimulatorExperiment` through the one driver
(:func:`experiment.driver.run_experiment`), which writes the same files as for the emulator. For
each policy the experiment loop (:mod:`experiment.loop`) places and schedules the config's jobs
as on the emulator, and the engine ``simulator.mode`` names (:data:`sim.engines.SIM_ENGINES`: its
back end, :mod:`sim.backend`) runs them: the same topology, routes (ECMP),
collectives, scaled gradient buckets and compute times, with rates max-min shared as the
config's ``simulator`` section says. Each job's figures are the simulator's: means over its
measured iterations of the slowest rank's times, as the emulator's report aggregates them; what
only the emulator measures (link counters, CPU, the fidelity monitor) is None. Times are virtual
(paper-scale) seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from common.errors import ConfigError
from common.units import BITS_PER_BYTE, MEGA, scale_bw_mbps
from experiment.config import BackendChecks
from experiment.driver import ExperimentBackend, PolicySession, Say, no_resources
from experiment.efficiency import distribution_efficiency
from experiment.loop import LoopEvent, LoopResult
from experiment.measurements import StartRecord
from experiment.run import batch_starts, config_cluster, experiment_jobs, last_starts, place_and_run
from experiment.summary import JobSummary, PolicyRun, PolicySummary, completion_figures
from experiment.timeline import up_phases
from placement.metrics import fragmentation, used_machines
from sim.backend import FlowSimBackend
from sim.engines import engines_where, sim_engine
from sim.flowsim import SimOptions
from sim.mltcp import MltcpFlows, MltcpParams
from topo.schema import SIMULATOR_LIMITS


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
    pat = scale_bw_mbps(cfg.ina.model_pat_gbps * 1000.0, cfg.scale) * MEGA / BITS_PER_BYTE
    return SimOptions(mtu=cfg.mtu if cfg.simulator.headers else None, latency_s=cfg.simulator.latency_us * 1e-6,
                      burst_bytes=bursts, ecn=cfg.simulator.ecn,
                      ecn_mark_share=cfg.simulator.ecn_mark_share, pat_bytes_s=pat, ina_results=cfg.ina.results,
                      ina_values_per_packet=cfg.ina.values_per_packet,
                      mltcp=mltcp_flows(cfg), overlap=cfg.simulator.overlap,
                      shared_efficiency=cfg.simulator.tcp_efficiency if cfg.simulator.sharing == "tcp" else 1.0)


def mltcp_flows(cfg) -> MltcpFlows | None:
    """MLTCP's shares for the ``steps`` engine when the config's congestion control is an MLTCP variant
    (every variant is the fluid model of spec §6.4 item 5 (a), shares in proportion to F), else None."""
    from experiment.config import MLTCP_CONGESTION_CONTROLS

    if cfg.congestion_control not in MLTCP_CONGESTION_CONTROLS:
        return None
    return MltcpFlows(MltcpParams(cfg.mltcp.slope, cfg.mltcp.intercept), idle_gap_s=cfg.mltcp.idle_gap_ms * 1e-3,
                      step=cfg.simulator.mltcp_step)


def sim_backend(cfg, g, bucket_bytes: Mapping[str, Sequence[int]] | None = None,
                start_delays_s: Mapping[str, float] | None = None) -> FlowSimBackend:
    """A fresh simulator back end for config ``cfg`` on topology ``g``: the links' rates at the scale,
    the config's warm-up and ``simulator`` options (``bucket_bytes``, ``start_delays_s``: as
    :class:`FlowSimBackend`)."""
    from experiment.config import ina_switches

    backend_class = sim_engine(cfg.simulator.mode).backend_class()
    return backend_class(g, sim_rates_mbps(g, cfg.scale), cfg.scale, cfg.warmup_iterations, sim_options(cfg, g),
                         bucket_bytes=bucket_bytes, ina_switches=ina_switches(cfg, g), drift=cfg.time_shifts.rule(),
                         start_delays_s=start_delays_s)


def _ina_needs_an_ina_engine(cfg, who: str) -> None:
    if not sim_engine(cfg.simulator.mode).models_ina:
        modes = engines_where(lambda e: e.models_ina)
        raise ConfigError(f"config.jobs: {who} uses collective 'ina', which the simulator models in its {modes} "
                          f"mode only; set simulator: {{mode: {modes}}}")


def _describe_simulated(cfg, g) -> str:
    return f"on the simulator ({cfg.simulator.mode} mode)"


class SimulatorExperiment(ExperimentBackend):
    """The flow-level simulator as the driver runs it: no root, nothing on the machine to set up."""

    name = "sim"
    what = "flow-level simulator"
    help = "the flow-level simulator: every job's collectives on the routed fabric, max-min fair rates (no root)"
    report_name = "flow-level simulator"
    checks = BackendChecks(shaped=False, ina=(_ina_needs_an_ina_engine,), describe=_describe_simulated,
                           limits=SIMULATOR_LIMITS)
    """The simulator models INA in some engines only, and holds paper-scale fabrics (NetPack's 10,000
    servers: :data:`topo.schema.SIMULATOR_LIMITS`); its links need not be shapeable."""

    def prepare(self, cfg, g, say: Say) -> dict:
        """Nothing to check on the machine; the capabilities say which engine runs (and, for an MLTCP
        congestion control, how the engine shares links)."""
        if mltcp_flows(cfg) is not None:
            if sim_engine(cfg.simulator.mode).models_congestion_control:
                say(f"congestion control {cfg.congestion_control}: links shared in proportion to MLTCP's F "
                    f"(slope {cfg.mltcp.slope:g}, intercept {cfg.mltcp.intercept:g}; sim.mltcp.MltcpFlows)")
            else:
                say(f"congestion control {cfg.congestion_control}: not modelled by the {cfg.simulator.mode} engine "
                    "(links are shared max-min; simulator mode: "
                    f"{engines_where(lambda e: e.models_congestion_control)} models it)")
        return {"engine": cfg.simulator.mode}

    def describe(self, cfg, caps: dict, specs: Sequence[str]) -> str:
        """What runs: the jobs or trace, the policies, the engine, the scale and the scheduler."""
        source = f"trace {cfg.trace.file}" if cfg.trace.file else f"{len(cfg.jobs)} jobs"
        return (f"{source}, {len(specs)} policies on the flow-level simulator ({cfg.simulator.mode} mode, "
                f"scale {cfg.scale:g}, scheduler {cfg.scheduler}); times in paper-scale seconds")

    def open(self, cfg, g, run_dir: str, caps: dict, say: Say):
        """A session that holds nothing: each policy gets a fresh simulator."""
        return no_resources(SimulatorSession(cfg, g, say))


class SimulatorSession(PolicySession):
    """Runs policies one after another on fresh simulators of one config and topology."""

    def __init__(self, cfg, g, say: Say):
        self.cfg, self.g, self.say = cfg, g, say

    def run_policy(self, spec: str, pdir: str) -> PolicyRun:
        """Policy ``spec`` on a fresh simulator: its summary and where each job last started.
        With a trace, a progress line every tenth of the jobs finished (and every minute at most)."""
        cfg, g = self.cfg, self.g
        t0 = time.monotonic()
        backend = sim_backend(cfg, g)
        jobs = experiment_jobs(cfg, g)
        progress = _progress(len(jobs), self.say) if cfg.trace.file else None
        states: list[tuple[int, int]] = []  # machines in use and fragmented as each batch started
        cluster = config_cluster(cfg, g)
        last_start_s = None

        def on_event(event: LoopEvent) -> None:
            nonlocal last_start_s
            if event.kind == "started" and event.time_s != last_start_s:  # a new batch, as batches_of cuts them
                view = cluster.view()
                states.append((used_machines(view), fragmentation(view)))
                last_start_s = event.time_s
            if progress is not None:
                progress(event)

        loop = place_and_run(cfg, g, spec, backend, on_event=on_event, cluster=cluster)
        starts = batch_starts(loop)
        summary = summarise_simulated(cfg, g, spec, jobs, loop, starts, backend, states, time.monotonic() - t0)
        self.say(f"    {len(jobs)} jobs simulated in {summary.wall_time_s:.1f} s")
        if any(d.shifts and not d.applied for d in loop.decisions):
            self.say(f"    time shifts not applied: the {cfg.simulator.mode} engine has no iteration phases to align "
                     f"(simulator mode: {engines_where(lambda e: e.aligns_phases)} has); decisions.json keeps them")
        records = getattr(backend, "records", {})
        return PolicyRun(summary, None, tuple(s.to_dict() for s in last_starts(starts)),
                         tuple(s.to_dict() for s in starts), tuple(d.to_dict() for d in loop.decisions),
                         up_phases(r for recs in records.values() for r in recs))


def summarise_simulated(cfg, g, spec: str, jobs, loop: LoopResult, starts: Sequence[StartRecord], backend,
                        states: Sequence[tuple[int, int]], wall_time_s: float) -> PolicySummary:
    """The :class:`PolicySummary` of a policy on the simulator: its jobs' simulated times and the
    cluster figures the emulator reports too; what only the emulator measures is None."""
    last = {s.job: s for s in last_starts(starts)}
    runs_of: dict[str, list] = {}
    for run in loop.runs:
        runs_of.setdefault(run.job, []).append(run)
    first_start = {}
    for s in starts:
        first_start.setdefault(s.job, s.start_s)
    per_job = []
    phases = getattr(backend, "phases", {})
    for j in jobs:
        est = backend.estimate(j.name)
        p = last[j.name]
        phase = phases.get(j.name) or {}
        per_job.append(JobSummary(
            job=j.name, model=j.model, workers=j.workers, collective=j.collective, wave=p.wave,
            machines=tuple(dict.fromkeys(p.machines_by_rank)), iterations_recorded=est.iterations,
            complete=est.iterations == j.iterations, comm_mean_s=est.comm_mean_s, comm_p99_s=None,
            compute_mean_s=est.compute_mean_s, ecn_marks=est.ecn_marks, fidelity=None, bound_s=None,
            bound_ratio=None, contended_with=(), estimate_s=None, estimate_error=None, estimate_ecn_marks=None,
            jct_s=loop.jct_s[j.name], arrival_s=j.arrival_s, start_s=first_start[j.name],
            end_s=runs_of[j.name][-1].end_s, runs=len(runs_of[j.name]), iteration_mean_s=est.iteration_mean_s,
            duration_s=j.duration_s, time_shift_s=phase.get("shift_s"), phase_error_max_s=phase.get("max_abs_error_s"),
            phase_errors_beyond=phase.get("beyond"),
            drift_threshold_s=phase.get("threshold_s"), realignments=phase.get("realignments"),
            pace_stretch=phase.get("stretch")))
    measured = [(j.comm_mean_s, j.iterations_recorded) for j in per_job if j.comm_mean_s is not None]
    iterations = sum(n for _, n in measured)
    machines = {m for j in per_job for m in j.machines}
    return PolicySummary(
        policy=spec, machines_used=len(machines),
        idle_machines_used=sum(1 for m in machines if cfg.background.get(m, 0) == 0),
        cross_machine_bytes=None, cluster_machines_in_use=max((u for u, _ in states), default=0),
        fragmented_machines=max((f for _, f in states), default=0),
        comm_mean_s=sum(c * n for c, n in measured) / iterations if iterations else None, comm_p99_s=None,
        busiest_link=None, busiest_link_utilisation=None, waves=len({s.wave for s in starts}),
        scheduler=cfg.scheduler, preemptions=loop.preemptions,
        jct_mean_s=sum(loop.jct_s.values()) / len(loop.jct_s), wall_time_s=wall_time_s, cpu_mean=None,
        cpu_p95=None, cpu_saturated=None, cpu_switch_thread_p95=None, ecn_method=None, host_tcp={},
        ecn_marks=_total([j.ecn_marks for j in per_job]), ecn_busiest_port=None, ecn_marks_busiest_port=None,
        ecn_most_marked_link=None,
        ecn_most_marked_link_marks=None, scale=cfg.scale, dilation=cfg.dilation, trustworthy=None,
        fidelity_reasons=(), links_checked=None, links_failed=None, link_check_methods={}, worst_link_check=None,
        jobs_checked=None, jobs_failed=None, worst_job_ratio=None, jobs=tuple(per_job), ina=None,
        distribution_efficiency=distribution_efficiency((j.iterations_recorded, j.compute_mean_s, j.jct_s)
                                                        for j in per_job),
        backend=SimulatorExperiment.name, **completion_figures(per_job))


def _total(values: Sequence[float | None]) -> float | None:
    """The sum of ``values``, None when any is None (not estimated)."""
    return None if not values or any(v is None for v in values) else sum(values)


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


def simulate_policy(cfg, g, spec: str) -> PolicyRun:
    """Policy ``spec`` of ``cfg`` on topology ``g`` on a fresh simulator, quietly: what a session of
    the driver returns for it, without a run directory (for scripts and tests)."""
    return SimulatorSession(cfg, g, lambda _line: None).run_policy(spec, "")
