"""The emulated network as a back end of the one driver (:class:`EmulatorExperiment`, registered
as ``emu``): one network per run, then for each policy in turn: place, run every job, measure.

:meth:`EmulatorExperiment.prepare` checks the machine and chooses every variant once (ECN marker,
switch port kind, INA engine, one machine or several servers, processes or containers);
:meth:`EmulatorExperiment.open` builds the network and yields a session whose
:meth:`EmulatorSession.run_policy` measures one policy (:func:`run_policy`). The driver
(:mod:`experiment.driver`) keeps the run's status, progress, files and report.

The network is built once per run and shared by the policies one after another (its routes
cover every machine pair; each policy's figures are counter differences and time windows of
its own waves). One policy's run, step by step:

1. a cluster with the configured background load (non-idle machines);
2. the policy places the pending jobs; the placed ones form a *wave* and run concurrently;
   jobs that did not fit wait for the next wave (after the wave's GPUs are released);
3. each wave launches every rank of every job in its placed machine's host (ranks on one
   machine share its interface), waits for all, and snapshots the switch port counters
   before and after;
4. the policy's results (placements, iteration records, bytes per directed link, CPU
   samples) are written to ``<run>/<policy>/`` as soon as the policy finishes, so an
   interrupted run keeps what it measured.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from common.errors import EmulationError
from common.units import wall_s
from emulator import capabilities
from emulator.backend import EmulatorBackend, WaveResult, uses_agents
from emulator.cluster import LOCAL, ClusterOptions
from emulator.containers import ContainerRunner, ContainerSettings
from emulator.cpu import CpuSampler
from emulator.ecn import resolve_method
from emulator.ina_fabric import InaFabric
from emulator.ina_runs import InaRuns, InaSetup, resolve_ina, unused_result, without_ina
from emulator.net import EmulatedNetwork, NetOptions, link_rates_mbps
from emulator.ports import resolve_port_type
from emulator.queues import PortSampler
from emulator.variants import ECN_MARKERS, SWITCH_PORTS, EcnMarker, SwitchPorts, ecn_marker, switch_ports
from emulator.worker_image import ensure_image
from experiment import driver
from experiment.config import ExperimentConfig, ina_jobs, ina_switches
from experiment.driver import ExperimentBackend, PolicySession
from experiment.loop import LoopEvent, LoopResult
from experiment.measurements import ClusterState, EcnSetup, PolicyResult, PortSamplerStats, StartRecord, WaveLinks
from experiment.report import job_iteration_times, summarise_policy
from experiment.resimulate import simulate_schedule
from experiment.results import write_json
from experiment.run import config_cluster, last_starts, place_and_run
from experiment.summary import PolicyRun
from jobs.launcher import ExecFn, ready_path
from measure import fidelity
from measure.linkstats import LinkSeries, counter_series, read_queue_samples
from measure.marking import marking_params
from placement.metrics import fragmentation, used_machines
from scheduling import make_scheduler


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
    e = cfg.ecn

    def marking(rate_mbps: float):
        # K as a delay is a virtual-time delay: at the dilated rate it is D times longer in wall
        # time, i.e. the same bytes of queue as at the undilated rate.
        return marking_params(e.threshold_bytes, wall_s(e.threshold_us, cfg.dilation), e.max_threshold_bytes,
                              e.max_probability, rate_mbps, cfg.queue_packets, cfg.mtu)

    return NetOptions(scale=cfg.scale, dilation=cfg.dilation, mtu=cfg.mtu, routing=cfg.routing,
                      queue_packets=cfg.queue_packets, congestion_control=cfg.congestion_control,
                      stats_interval_s=cfg.stats_interval_s, ecn=ecn, marking=marking,
                      switch_ports=ports, ina_switches=tuple(ina_switches), cluster=cluster_options(cfg))


def cluster_options(cfg: ExperimentConfig) -> ClusterOptions | None:
    """The servers of a cluster-mode run (this machine first), or None for this machine alone."""
    c = cfg.cluster
    if not c.servers:
        return None
    return ClusterOptions((LOCAL, *c.servers), user=c.user, ssh_config=c.ssh_config or None,
                          connect_timeout_s=c.connect_timeout_s)


def run_policy(cfg: ExperimentConfig, g, spec: str, pdir: str, progress: Progress, net: EmulatedNetwork,
               ecn: tuple[str, str] = ("none", "not requested"), hosts_tcp: dict | None = None,
               ina: InaSetup | None = None, spawn: ExecFn | None = None) -> PolicyResult:
    """Run every job of ``cfg`` under placement policy ``spec`` on the run's network ``net``.

    The experiment loop (:mod:`experiment.loop`) drives the emulator back end
    (:class:`emulator.backend.EmulatorBackend`) with the config's scheduler; with the default
    ``waves`` scheduler the jobs the policy places run together as a wave and the others wait
    for the whole wave to end. The network is shared by the policies of a run, one after
    another: its routes are static (every machine pair), every wave ends with its workers gone
    and its queues drained, the hosts keep no TCP metrics between connections, and every
    figure is a difference of counters or a time window of the policy's own waves. ``ecn`` is
    the resolved marking path and why (:func:`emulator.ecn.resolve_method`); ``hosts_tcp`` the
    hosts' TCP settings; ``ina`` the run's INA aggregators, when some job uses collective ``ina``;
    ``spawn`` starts the workers (default: processes in the machines; or
    :class:`emulator.containers.ContainerRunner`).
    """
    os.makedirs(pdir, exist_ok=True)
    sampler = CpuSampler()
    queue_path = os.path.join(pdir, "queue_stats.jsonl")
    t_start = time.time()
    ports = PortSampler(queue_path, net.port_links(), net.marker, cfg.ecn.sample_interval_s, net.qdisc_stats)
    batches: list[list[str]] = []
    cluster_states: list[ClusterState] = []
    cluster = config_cluster(cfg, g)

    def on_batch(index: int, runs) -> None:
        batches.append([job.name for job, _ in runs])
        view = cluster.view()  # the loop has applied the batch's placements: every running job is in it
        cluster_states.append(ClusterState(index, used_machines(view), fragmentation(view)))
        progress.say(f"    wave {index}: " + "; ".join(
            f"{p.job} on {len(p.machines)} machine(s) {','.join(p.machines)}" for _, p in runs))

    def on_event(event: LoopEvent) -> None:
        if event.kind == "preempted":
            progress.say(f"    {event.job} preempted at {event.time_s:.2f} s")

    ina_runs = None
    if ina is not None and ina.fabric is not None:
        ina_runs = InaRuns(g, ina.fabric, cfg.ina.slots, ina.switches, pdir)
        ina_runs.begin()
    backend = EmulatorBackend(cfg, net, pdir, progress, on_batch=on_batch, ina=ina_runs, spawn=spawn)
    counters_before = net.switch_counters()
    sampler.start()
    ports.start()
    try:
        loop = place_and_run(cfg, g, spec, backend, on_event, cluster)
    finally:
        backend.close()
        sampler.stop()
        ports.stop()
    # Bytes per link over the whole policy, counted once: batches of an online schedule overlap,
    # so the sum of their own (start to end) counts would count shared spans twice.
    link_bytes = net.link_bytes(counters_before, net.switch_counters())
    if ports.error:
        raise EmulationError(f"sampling the switch ports failed: {ports.error}")
    ina_result = None
    if ina_runs is not None:
        ina_result = ina_runs.result(ina.engine, ina.why)
    elif ina is not None:
        ina_result = unused_result(ina.why, cfg.ina.slots)
    ctrl_error = net.controller.logged_exception()
    if ctrl_error:
        raise EmulationError(f"the controller logged an exception: {ctrl_error}; "
                             f"see {net.controller.log_path}")
    starts = start_records(loop, batches)
    placements = last_starts(starts)
    waves = sorted(backend.waves, key=lambda w: w.index)
    rates = dict(net.rates)
    series = LinkSeries(g, os.path.join(net.run_dir, "port_stats.jsonl"))
    queue_samples = read_queue_samples(queue_path)
    marks = counter_series(queue_samples, "marks") if net.options.ecn.measures else None
    windows = [w.window_s for w in waves if w.window_s]
    cpu_measured = sampler.summary(windows)
    records = [r for w in waves for r in w.records]
    evidence = job_evidence(cfg, placements, records,
                            {j: r.ps_host for j, r in ina_result.jobs.items()} if ina_result else None)
    verdicts = fidelity.job_verdicts(g, link_rates_mbps(g, cfg.scale), evidence, cfg.mtu)
    # The simulator re-drives the run's schedule: its batches one after another where the
    # scheduler runs them so, else every start and preemption at its time.
    in_batches = make_scheduler(cfg.scheduler, seed=cfg.seed).starts_in_batches
    estimates = simulate_schedule(cfg, g, loop, {e.job: e.bucket_bytes for e in evidence if e.bucket_bytes},
                                  batches if in_batches else None)
    result = PolicyResult(
        policy=spec, scheduler=cfg.scheduler, placements=placements, starts=starts,
        cluster_states=tuple(cluster_states), waves=tuple(wave_links(w, series, marks) for w in waves),
        jct_s=loop.jct_s, preemptions=loop.preemptions, link_bytes=link_bytes, link_rate_mbps=rates,
        cpu=sampler.summary(),
        cpu_measured=cpu_measured, ecn=EcnSetup(ecn[0], ecn[1], hosts_tcp or {}),
        fidelity=fidelity.assess(cpu_measured, fidelity.link_checks(queue_samples, rates, windows or None, cfg.mtu,
                                                                    cfg.queue_packets), verdicts),
        estimates=estimates, scale=cfg.scale, dilation=cfg.dilation,
        port_sampler=PortSamplerStats(ports.samples_taken, cfg.ecn.sample_interval_s,
                                      ports.cost_s / max(1, ports.samples_taken)),
        dir=pdir, queue_stats=os.path.basename(queue_path), wall_time_s=time.time() - t_start, ina=ina_result)
    write_json(os.path.join(pdir, "measurements.json"), result.to_dict())
    result.summary = summarise_policy(cfg, g, result, records)
    return result


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
                 ps_hosts: Mapping[str, str] | None = None) -> list[fidelity.JobEvidence]:
    """What the fidelity monitor needs of every placed job: where its ranks ran, the buckets its
    ranks really allreduced (from their records), its communication time in virtual seconds and,
    for an INA job, its parameter server's machine (``ps_hosts``)."""
    times = job_iteration_times(records, cfg.dilation)
    first = {}
    for r in records:
        if r.rank == 0 and (r.job not in first or r.iteration < first[r.job].iteration):
            first[r.job] = r
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
            ps_host=(ps_hosts or {}).get(job.name)))
    return out


def wave_links(w: WaveResult, series: LinkSeries, marks=None) -> WaveLinks:
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
    """

    name = "emu"
    what = "emulated network"
    concurrent_runs = False  # one network of this machine's at a time

    def __init__(self):
        self.ecn: tuple[str, str] = ("none", "not requested")
        self.marker: EcnMarker = ECN_MARKERS["none"]
        self.ports: SwitchPorts = SWITCH_PORTS["system"]
        self.ina: InaSetup | None = None
        self.containers: ContainerSettings | None = None

    def prepare(self, cfg: ExperimentConfig, g, say) -> dict:
        """Root, tools and this machine's capabilities, with every variant resolved and why."""
        capabilities.require_root()
        capabilities.require_tools()
        caps = capabilities.detect()
        cluster = cluster_options(cfg)
        if cluster is not None and cfg.ecn.marking != "off":  # validate() let only `optional` through
            self.ecn = ("none", "ECN not measured: cluster mode (the marker runs on one machine)")
        else:
            self.ecn = resolve_method(cfg.ecn.marking, cfg.ecn.method, caps)
        caps["ecn_method"], caps["ecn_why"] = self.ecn
        self.marker = ecn_marker(self.ecn[0])
        if ina_jobs(cfg):
            engine, why = resolve_ina(cfg)
            self.ina = InaSetup(engine, why, ina_switches(cfg, g) if engine else ())
            caps["ina_engine"], caps["ina_why"] = engine or "none", why
        if cluster is not None:  # validate() refused switch_ports: afxdp
            caps["switch_ports"], caps["switch_ports_why"] = "system", "cluster mode: plain veth ports on every server"
            caps["cluster"] = cluster_caps(g, cluster)
        else:
            caps["switch_ports"], caps["switch_ports_why"] = resolve_port_type(
                cfg.switch_ports, cfg.mtu, caps["ovs_datapath"], caps["afxdp_missing"])
        self.ports = switch_ports(caps["switch_ports"])
        if cfg.container.engine == "docker":
            image = ensure_image(say)
            self.containers = ContainerSettings(image.tag, cfg.container.cpus)
            caps["container"] = {"engine": "docker", "cpus": cfg.container.cpus, **image.to_dict()}
        else:
            caps["container"] = {"engine": "none"}
        return caps

    def describe(self, cfg: ExperimentConfig, caps: dict, specs) -> str:
        """The jobs, policies, scale and dilation, runtime, datapath, ports, ECN and INA of the run."""
        runtime = "agent" if uses_agents(cfg) else "torch"
        if self.containers is not None:
            runtime += (f" runtime in docker containers ({self.containers.image}, {self.containers.cpus:g} CPU "
                        f"each)")
        else:
            runtime += " runtime as processes"
        if "cluster" in caps:
            c = caps["cluster"]
            runtime += (f", spread over {len(c['servers'])} servers ({', '.join(c['servers'])}; "
                        f"{len(c['tunnels'])} links as SSH tunnels)")
        ecn, ina = self.ecn, self.ina
        return (f"{len(cfg.jobs)} jobs, {len(specs)} policies, scale {cfg.scale:g}, dilation {cfg.dilation:g} "
                f"(wall time of the iterations x{cfg.dilation:g}; times reported in paper-scale seconds), {runtime}, "
                f"datapath {caps['ovs_datapath']} with {caps['switch_ports']} switch ports "
                f"({caps['switch_ports_why']}), ECN {ecn[0]} ({ecn[1]})"
                + (f", INA {ina.engine or 'not used'} ({ina.why})" if ina is not None else ""))

    @contextlib.contextmanager
    def open(self, cfg: ExperimentConfig, g, run_dir: str, caps: dict, say):
        """The run's network (and INA aggregators), checked with TCP, shared by every policy in turn.

        With INA jobs and no INA engine (``ina.use: optional``), they run the ring allreduce
        (:func:`emulator.ina_runs.without_ina`); ``config.json`` keeps what was asked.
        """
        ina = self.ina
        if ina is not None and ina.engine is None:
            cfg = without_ina(cfg)
        progress = Progress(say=say)
        with contextlib.ExitStack() as stack:
            net = stack.enter_context(EmulatedNetwork(g, run_dir, net_options(
                cfg, self.marker, self.ports, ina.switches if ina else ())))
            if ina is not None and ina.engine is not None:
                ina.fabric = stack.enter_context(InaFabric(net, ina.engine))
                say(f"INA: {ina.engine} aggregators on {len(ina.switches)} switches ({', '.join(ina.switches)}), "
                    f"{cfg.ina.slots} slots each")
            say(f"network up: {len(net.hosts)} machines, {len(net.switch_intfs)} switch ports, "
                f"{net.controller.status().get('rules', '?')} rules ({cfg.routing}), ECN: {self.ecn[0]}; "
                f"every policy runs on it in turn")
            hosts_tcp = net.host_tcp_settings()
            spawn = ContainerRunner(net, self.containers, [run_dir]) if self.containers is not None else None
            sanity_check(net, run_dir)
            yield EmulatorSession(cfg, g, net, progress, self.ecn, hosts_tcp, ina, spawn)


class EmulatorSession(PolicySession):
    """Policies one after another on the run's emulated network (:func:`run_policy`)."""

    def __init__(self, cfg: ExperimentConfig, g, net: EmulatedNetwork, progress: Progress,
                 ecn: tuple[str, str], hosts_tcp: dict, ina: InaSetup | None, spawn: ExecFn | None):
        self.cfg, self.g, self.net, self.progress = cfg, g, net, progress
        self.ecn, self.hosts_tcp, self.ina, self.spawn = ecn, hosts_tcp, ina, spawn

    def run_policy(self, spec: str, pdir: str) -> PolicyRun:
        """Measure policy ``spec``; its measurements go to ``pdir`` as they are taken."""
        result = run_policy(self.cfg, self.g, spec, pdir, self.progress, self.net, self.ecn, self.hosts_tcp,
                            self.ina, self.spawn)
        return PolicyRun(result.summary, result, tuple(p.to_dict() for p in result.placements),
                         tuple(s.to_dict() for s in result.starts))


def run_experiment(cfg: ExperimentConfig, progress: Progress | None = None, run_dir: str | None = None,
                   policies: list[str] | None = None) -> str:
    """:func:`experiment.driver.run_experiment` on the emulator, with ``progress``'s stream; returns the
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
