"""The emulated network as a back end of the one driver (:class:`EmulatorExperiment`, registered
as ``emu``): one network per run, then for each policy in turn: place, run every job, measure.

:meth:`EmulatorExperiment.prepare` checks the machine and chooses every variant once (ECN marker,
switch port kind, INA engine, one machine or several servers, processes or containers);
:meth:`EmulatorExperiment.open` builds the network and yields a session whose
:meth:`EmulatorSession.run_policy` measures one policy (:func:`run_policy`). The driver
(:mod:`experiment.run.driver`) keeps the run's status, progress, files and report. The network is
built once per run and shared by the policies one after another; each policy's results are
written to ``<run>/<policy>/`` as soon as it finishes.

Why sharing the network is sound, and one policy's run step by step: ``docs/architecture.md``
(The emulator back end).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from common.errors import EmulationError
from common.units import wall_s
from congestion import congestion_control
from emulator import config_checks
from emulator.cluster import LOCAL, ClusterOptions
from emulator.variants import (
    ECN_MARKERS,
    SWITCH_PORTS,
    EcnMarker,
    SwitchPorts,
    container_engine,
    ecn_marker,
    ecn_marking,
    ina_use,
    resolve_ecn,
    switch_ports,
    worker_runtime,
)
from experiment.config.schema import BackendChecks, ExperimentConfig, ina_jobs, ina_switches
from experiment.reporting.summary import PolicyRun
from experiment.run import driver
from experiment.run.plugin import ExperimentBackend, PolicySession, ScheduleEstimator
from measure.marking import marking_params
from topo.schema import EMULATOR_LIMITS
from workers.launcher import ExecFn, ready_path

if TYPE_CHECKING:
    from emulator.capabilities import RunCapabilities
    from emulator.containers import ContainerSettings
    from emulator.ina_runs import InaSetup
    from emulator.net import EmulatedNetwork, NetOptions

# The network, its processes and the measurements (os-ken's controller among them) are imported by
# the methods that use them: `--help` and `run_testbed.py list` read this module's back end class.


class Progress:
    """Prints progress lines; a background thread reports iterations done while jobs run."""

    def __init__(self, stream=sys.stdout, say: Callable[[str], None] | None = None):
        self.stream = stream
        self._say = say

    def say(self, msg: str) -> None:
        """Print one progress line (or hand it to the ``say`` this was made with)."""
        if self._say is not None:
            self._say(msg)
        else:
            print(msg, file=self.stream, flush=True)

    def watch(self, specs, total_iterations: int, interval_s: float = 5.0):
        """Start a thread that prints workers joined, then iterations done per job; returns a stop Event."""
        stop = threading.Event()
        specs = list(specs)
        by_job = {s.job: s.records_path for s in specs if s.rank == 0}

        def loop():
            while not stop.wait(interval_s):
                joined = sum(1 for s in specs if os.path.exists(ready_path(s)))
                if joined < len(specs):
                    self.say(f"      workers joined: {joined}/{len(specs)}")
                    continue
                parts = []
                for job, path in sorted(by_job.items()):
                    try:
                        with open(path) as f:
                            done = sum(1 for _ in f)
                    except FileNotFoundError:
                        done = 0
                    parts.append(f"{job} {done}/{total_iterations}")
                self.say("      iterations: " + ", ".join(parts))

        threading.Thread(target=loop, daemon=True).start()
        return stop


def net_options(cfg: ExperimentConfig, ecn: EcnMarker = ECN_MARKERS["none"],
                ports: SwitchPorts = SWITCH_PORTS["system"], ina_switches: tuple[str, ...] = ()) -> NetOptions:
    """The network options of an experiment, with its ECN marker and switch port kind (resolved
    once, :mod:`emulator.variants`) and the switches that get an INA aggregator port."""
    from emulator.net import NetOptions

    e = cfg.ecn

    def marking(rate_mbps: float):
        # K as a delay is a virtual-time delay: at the dilated rate it is D times longer in wall
        # time, i.e. the same bytes of queue as at the undilated rate.
        return marking_params(e.threshold_bytes, wall_s(e.threshold_us, cfg.dilation), e.max_threshold_bytes,
                              e.max_probability, rate_mbps, cfg.queue_packets, cfg.mtu)

    m = cfg.mltcp
    return NetOptions(scale=cfg.scale, dilation=cfg.dilation, mtu=cfg.mtu, routing=cfg.routing,
                      queue_packets=cfg.queue_packets, host_queue_packets=cfg.host_queue_packets,
                      congestion_control=congestion_control(cfg.congestion_control),
                      stats_interval_s=cfg.stats_interval_s, ecn=ecn, marking=marking,
                      switch_ports=ports, ina_switches=tuple(ina_switches), cluster=cluster_options(cfg),
                      mltcp=(m.slope, m.intercept, wall_s(m.idle_gap_ms / 1000.0, cfg.dilation)))


def cluster_options(cfg: ExperimentConfig) -> ClusterOptions | None:
    """The servers of a cluster-mode run (this machine first), or None for this machine alone."""
    c = cfg.cluster
    if not c.servers:
        return None
    return ClusterOptions((LOCAL, *c.servers), user=c.user, ssh_config=c.ssh_config or None,
                          connect_timeout_s=c.connect_timeout_s)


def sanity_check(net: EmulatedNetwork, run_dir: str) -> None:
    """TCP between the first and the last machine over the controller's routes, before any job."""
    names = sorted(net.hosts, key=lambda m: net.g.nodes[m]["index"])
    failures = net.tcp_check([names[0]], [names[-1]], timeout_s=15)
    if failures:
        raise EmulationError(f"TCP sanity check {names[0]} -> {names[-1]} failed: {failures}; "
                             f"see {net.controller.log_path}")


class EmulatorExperiment(ExperimentBackend):
    """The emulated network as the driver runs it.

    :meth:`prepare` checks the machine (root, tools, Open vSwitch) and chooses, once, what the run
    runs with: the ECN marking path, the switch port kind, the INA engine, one machine or a
    cluster, processes or containers; :meth:`open` builds the network the policies share.

    Args:
        cli: open Mininet's CLI on the network once each policy has placed its first jobs, before
            they start, and go on when the user leaves it (:meth:`EmulatorSession.run_policy`).
    """

    name = "emu"
    what = "emulated network"
    help = "the emulated network: real traffic in Mininet, bandwidth-limited links (root needed)"
    report_name = "emulated"
    measured = True
    opens_cli = True
    concurrent_runs = False  # one network of this machine's at a time
    checks = BackendChecks(
        shaped=True, fields=(config_checks.ecn_thresholds, config_checks.afxdp_mtu),
        topology=(config_checks.cluster_mode, config_checks.threshold_delay, config_checks.marking_ramp,
                  config_checks.runs_no_trace),
        last=(config_checks.time_limit,), describe=config_checks.describe, limits=EMULATOR_LIMITS)
    """Its links must be rates it can shape, ECN thresholds within its queues, AF_XDP frames within
    4 kB, cluster mode without what runs on one machine, the run within ``time_limit_s``, and no
    trace (:mod:`emulator.config_checks`)."""

    def __init__(self, cli: bool = False):
        self.cli = cli
        self.ecn: tuple[str, str] = ("none", "not requested")
        self.marker: EcnMarker = ECN_MARKERS["none"]
        self.ports: SwitchPorts = SWITCH_PORTS["system"]
        self.ina: InaSetup | None = None
        self.containers: ContainerSettings | None = None
        self.caps: RunCapabilities | None = None  # what prepare() found and chose

    def prepare(self, cfg: ExperimentConfig, g, say) -> dict:
        """Root, tools and this machine's capabilities, with every variant resolved and why."""
        from emulator import capabilities
        from emulator.ina_runs import InaSetup, resolve_ina
        from emulator.ports import resolve_port_type
        from measure.footprint import check_memory, footprint, mem_available_bytes

        capabilities.require_root()
        capabilities.require_tools()
        machine = capabilities.detect()
        cluster = cluster_options(cfg)
        if cluster is not None and ecn_marking(cfg.ecn.marking).on:  # validate() let only `optional` through
            self.ecn = ("none", "ECN not measured: cluster mode (the marker runs on one machine)")
        else:
            self.ecn = resolve_ecn(cfg.ecn.marking, cfg.ecn.method, machine.has_red, machine.bpf_marker_missing)
        self.marker = ecn_marker(self.ecn[0])
        ina_engine = ina_why = None
        if ina_jobs(cfg):
            engine, ina_why = resolve_ina(cfg)
            self.ina = InaSetup(engine, ina_why, ina_switches(cfg, g) if engine else ())
            ina_engine = engine or "none"
        cluster_record = memory = None
        if cluster is not None:  # validate() refused switch_ports: afxdp
            ports, ports_why = "system", "cluster mode: plain veth ports on every server"
            cluster_record = cluster_caps(g, cluster)
        else:
            available = mem_available_bytes()
            afxdp = footprint(g, "afxdp", available)
            too_big = None if afxdp.fits else (
                f"AF_XDP ports would take {afxdp.text()}; plain veths wake ovs-vswitchd's main thread for every "
                f"packet, so the fidelity monitor's verdict says whether the network kept up")
            ports, ports_why = resolve_port_type(cfg.switch_ports, cfg.mtu, machine.ovs_datapath,
                                                 machine.afxdp_missing, too_big)
            memory = check_memory(g, ports, available, cfg.memory_check)
        self.ports = switch_ports(ports)
        self.containers, container = container_engine(cfg.container.engine).prepare(cfg.container.cpus, say)
        self.caps = capabilities.RunCapabilities(
            machine, self.ecn[0], self.ecn[1], ports, ports_why, container, ina_engine=ina_engine, ina_why=ina_why,
            cluster=cluster_record, memory=memory)
        return self.caps.to_dict()

    def describe(self, cfg: ExperimentConfig, caps: dict, specs) -> str:
        """The jobs, policies, scale and dilation, runtime, datapath, ports, ECN and INA of the run, as
        :meth:`prepare` found and chose them."""
        runtime = worker_runtime(cfg.runtime, cfg.mode).name
        if self.containers is not None:
            runtime += (f" runtime in docker containers ({self.containers.image}, {self.containers.cpus:g} CPU "
                        f"each)")
        else:
            runtime += " runtime as processes"
        run = self.caps
        if run.cluster is not None:
            c = run.cluster
            runtime += (f", spread over {len(c['servers'])} servers ({', '.join(c['servers'])}; "
                        f"{len(c['tunnels'])} links as SSH tunnels)")
        ecn, ina = self.ecn, self.ina
        return (f"{len(cfg.jobs)} jobs, {len(specs)} policies, scale {cfg.scale:g}, dilation {cfg.dilation:g} "
                f"(wall time of the iterations x{cfg.dilation:g}; times reported in paper-scale seconds), {runtime}, "
                f"datapath {run.machine.ovs_datapath} with {run.switch_ports} switch ports "
                f"({run.switch_ports_why}), ECN {ecn[0]} ({ecn[1]})"
                + (f", INA {ina.engine or 'not used'} ({ina.why})" if ina is not None else ""))

    @contextlib.contextmanager
    def open(self, cfg: ExperimentConfig, g, run_dir: str, caps: dict, say, estimate: ScheduleEstimator):
        """The run's network (and INA aggregators), checked with TCP, shared by every policy in turn;
        its sessions set ``estimate``'s figures beside what they measure.

        With INA jobs and no INA engine (``ina.use: optional``), they run the ring allreduce
        (:func:`emulator.ina_runs.without_ina`); ``config.json`` keeps what was asked.
        """
        from emulator.containers import ContainerRunner
        from emulator.ina_fabric import InaFabric
        from emulator.ina_runs import without_ina
        from emulator.net import EmulatedNetwork
        from ina.plan import pat_pps

        ina = self.ina
        if ina is not None and ina.engine is None:
            cfg = without_ina(cfg)
        progress = Progress(say=say)
        with contextlib.ExitStack() as stack:
            net = stack.enter_context(EmulatedNetwork(g, run_dir, net_options(
                cfg, self.marker, self.ports, ina.switches if ina else ())))
            if ina is not None and ina.engine is not None:
                ina.fabric = stack.enter_context(InaFabric(
                    net, ina.engine, values_per_packet=cfg.ina.values_per_packet,
                    pat_pps=math.inf if cfg.ina.pat_gbps is None
                    else pat_pps(cfg.ina.pat_gbps, cfg.scale, cfg.dilation, cfg.ina.values_per_packet)))
                say(f"INA: {ina.engine} aggregators on {len(ina.switches)} switches ({', '.join(ina.switches)}), "
                    f"{cfg.ina.slots} slots each, {cfg.ina.values_per_packet} values per packet, "
                    f"results {cfg.ina.results}")
                capacity = ina.fabric.capacity.line(ina.engine, cfg.ina.values_per_packet)
                if ina.fabric.capacity.refuses and ina_use(cfg.ina.use).required:
                    raise EmulationError(capacity)
                say(capacity)
            say(f"network up: {len(net.hosts)} machines, {len(net.switch_intfs)} switch ports, "
                f"{net.controller.status().get('rules', '?')} rules ({cfg.routing}), ECN: {self.ecn[0]}; "
                f"every policy runs on it in turn")
            hosts_tcp = net.host_tcp_settings()
            spawn = ContainerRunner(net, self.containers, [run_dir]) if self.containers is not None else None
            sanity_check(net, run_dir)
            yield EmulatorSession(cfg, g, net, progress, self.ecn, hosts_tcp, ina, spawn, estimate, self.cli)


class EmulatorSession(PolicySession):
    """Policies one after another on the run's emulated network (:func:`run_policy`)."""

    backend_name = EmulatorExperiment.name
    """The back end's registry key, as its policies' summaries name it."""

    def __init__(self, cfg: ExperimentConfig, g, net: EmulatedNetwork, progress: Progress,
                 ecn: tuple[str, str], hosts_tcp: dict, ina: InaSetup | None, spawn: ExecFn | None,
                 estimate: ScheduleEstimator, cli: bool = False):
        self.cfg, self.g, self.net, self.progress = cfg, g, net, progress
        self.ecn, self.hosts_tcp, self.ina, self.spawn = ecn, hosts_tcp, ina, spawn
        self.estimate, self.cli = estimate, cli

    def run_policy(self, spec: str, pdir: str) -> PolicyRun:
        """Measure policy ``spec`` (:class:`emulator.policy_run.PolicyMeasurement`); its
        measurements go to ``pdir`` as they are taken. With ``cli``, Mininet's CLI opens on the
        network once the policy has placed its first jobs (:mod:`emulator.shell`)."""
        from emulator.policy_run import PolicyMeasurement

        result, cluster = PolicyMeasurement(self, spec, pdir).run()
        return PolicyRun(result.summary, result, tuple(p.to_dict() for p in result.placements),
                         tuple(s.to_dict() for s in result.starts), result.decisions, result.timeline, cluster)


def run_experiment(cfg: ExperimentConfig, progress: Progress | None = None, run_dir: str | None = None,
                   policies: list[str] | None = None) -> str:
    """:func:`experiment.run.driver.run_experiment` on the emulator, with ``progress``'s stream; returns the
    run directory."""
    progress = progress or Progress()
    return driver.run_experiment(cfg, EmulatorExperiment(), progress.say, run_dir, policies, progress.stream)


def cluster_caps(g, cluster: ClusterOptions) -> dict:
    """What a cluster-mode run records: its servers, the nodes on each, the tunnels, and where the
    CPU is watched."""
    from topo.partition import spread

    return {"servers": list(cluster.servers), "user": cluster.user, "ssh_config": cluster.ssh_config,
            **spread(g, list(cluster.servers)), "cpu_sampled_on": LOCAL,
            "tunnel_kind": "ssh (Mininet's RemoteSSHLink)"}
