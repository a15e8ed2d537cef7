"""The simulator back end of the experiment driver: every policy through the loop, no root needed.

``run_testbed.py --backend sim`` runs :class:`SimulatorExperiment` through the one driver
(:func:`experiment.run.driver.run_experiment`), which writes the same files as for the emulator. For
each policy the experiment loop (:mod:`experiment.run.loop`) places and schedules the config's jobs
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
from common.paths import shown
from common.progress import Eta
from common.units import BITS_PER_BYTE, MEGA, scale_bw_mbps
from congestion import MLTCP_WEIGHTS, congestion_control
from experiment.config.schema import BackendChecks
from experiment.config.workload import experiment_jobs
from experiment.reporting.summary import PolicyRun
from experiment.reporting.timeline import up_phases
from experiment.run.plugin import ExperimentBackend, PolicySession, Say, ScheduleEstimator, no_resources
from experiment.run.policy import run_policy_loop, summarise_loop
from measure.shaping import virtual_rates_mbps
from sim.backend import FlowSimBackend
from sim.engines import engines_where, sim_engine
from sim.flowsim import SimOptions
from sim.mltcp import MltcpFlows, MltcpParams
from topo.schema import SIMULATOR_LIMITS


def sim_options(cfg, g) -> SimOptions:
    """What the simulator models, from the config's ``simulator`` section (headers at the MTU,
    per-message latency in virtual seconds, the emulated shapers' token buckets) and its ``ina``
    one (every switch's PAT at the scale, how results come back)."""
    from measure.shaping import burst_bytes

    bursts = None
    if cfg.simulator.token_buckets:  # each shaper's depth at its shaped (dilated) rate, as the emulator sets it
        bursts = {link: burst_bytes(r, cfg.mtu) for link, r in virtual_rates_mbps(g, cfg.scale * cfg.dilation).items()}
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
    if not congestion_control(cfg.congestion_control).is_mltcp:
        return None
    return MltcpFlows(MltcpParams(cfg.mltcp.slope, cfg.mltcp.intercept), idle_gap_s=cfg.mltcp.idle_gap_ms * 1e-3,
                      step=cfg.simulator.mltcp_step)


SHARING_SAYS: dict[str, Callable[[object], str]] = {
    MLTCP_WEIGHTS: lambda cfg: (f"in proportion to MLTCP's F (slope {cfg.mltcp.slope:g}, intercept "
                                f"{cfg.mltcp.intercept:g}; sim.mltcp.MltcpFlows)"),
}
"""A congestion control's own sharing model (:attr:`congestion.Sharing.model`) -> how a run's start says
the engine shares links under it, from the config; the configured max-min or TCP share says nothing."""


def sim_backend(cfg, g, bucket_bytes: Mapping[str, Sequence[int]] | None = None,
                start_delays_s: Mapping[str, float] | None = None) -> FlowSimBackend:
    """A fresh simulator back end for config ``cfg`` on topology ``g``: the links' rates at the scale,
    the config's warm-up and ``simulator`` options (``bucket_bytes``, ``start_delays_s``: as
    :class:`FlowSimBackend`)."""
    from experiment.config.schema import ina_switches

    backend_class = sim_engine(cfg.simulator.mode).backend_class()
    return backend_class(g, virtual_rates_mbps(g, cfg.scale), cfg.scale, cfg.warmup_iterations, sim_options(cfg, g),
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
        """Nothing to check on the machine; the capabilities say which engine runs (and, for a congestion
        control with a sharing model of its own, how the engine shares links)."""
        cc = congestion_control(cfg.congestion_control)
        engine = sim_engine(cfg.simulator.mode)
        if not cc.sharing(engine).modelled:
            say(f"congestion control {cc.name}: not modelled by the {engine.name} engine (links are shared "
                f"max-min; simulator mode: {engines_where(lambda e: cc.sharing(e).modelled)} models it)")
        elif (shared := SHARING_SAYS.get(cc.sharing(engine).model)) is not None:
            say(f"congestion control {cc.name}: links shared {shared(cfg)}")
        return {"engine": cfg.simulator.mode}

    def describe(self, cfg, caps: dict, specs: Sequence[str]) -> str:
        """What runs: the jobs or trace, the policies, the engine, the scale and the scheduler."""
        source = f"trace {shown(cfg.trace.file)}" if cfg.trace.file else f"{len(cfg.jobs)} jobs"
        return (f"{source}, {len(specs)} policies on the flow-level simulator ({cfg.simulator.mode} mode, "
                f"scale {cfg.scale:g}, scheduler {cfg.scheduler}); times in paper-scale seconds")

    def open(self, cfg, g, run_dir: str, caps: dict, say: Say, estimate: ScheduleEstimator | None):
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
        progress = _progress(len(experiment_jobs(cfg, g)), self.say) if cfg.trace.file else None
        run = run_policy_loop(cfg, g, spec, backend, on_event=progress)
        summary = summarise_loop(cfg, spec, run, SimulatorExperiment.name, time.monotonic() - t0,
                                 figures=backend.estimate, phases=getattr(backend, "phases", {}))
        self.say(f"    {len(run.jobs)} jobs simulated in {summary.wall_time_s:.1f} s")
        if any(d.shifts and not d.applied for d in run.loop.decisions):
            self.say(f"    time shifts not applied: the {cfg.simulator.mode} engine has no iteration phases to align "
                     f"(simulator mode: {engines_where(lambda e: e.aligns_phases)} has); decisions.json keeps them")
        records = getattr(backend, "records", {})
        return run.policy_run(summary, up_phases(r for recs in records.values() for r in recs))


def _progress(total: int, say: Callable[[str], None]) -> Callable:
    """An ``on_event`` for the loop that says how many of ``total`` jobs have finished, every tenth
    of them or every minute of wall time, whichever comes first."""
    state = {"done": 0, "said": 0, "at": time.monotonic()}
    eta = Eta(total)

    def on_event(event) -> None:
        if event.kind != "finished":
            return
        state["done"] += 1
        now = time.monotonic()
        if state["done"] - state["said"] >= max(1, total // 10) or now - state["at"] >= 60:
            state["said"], state["at"] = state["done"], now
            say(f"    {state['done']}/{total} jobs finished (simulated time {event.time_s:,.0f} s; "
                f"{eta.text(state['done'])})")
    return on_event


def simulate_policy(cfg, g, spec: str) -> PolicyRun:
    """Policy ``spec`` of ``cfg`` on topology ``g`` on a fresh simulator, quietly: what a session of
    the driver returns for it, without a run directory (for scripts and tests)."""
    return SimulatorSession(cfg, g, lambda _line: None).run_policy(spec, "")
