"""Experiment configuration: a tree of frozen dataclasses loaded strictly from YAML.

:func:`load` reads the file within bounds (:mod:`experiment.config.file`: size, strict UTF-8,
nesting depth, values after alias expansion, duplicate keys) and builds the tree, rejecting
unknown keys with a "did you mean" hint. Every field declares its type and valid range once,
as a rule in its metadata (:mod:`experiment.config.rules`: :class:`Integer`, :class:`Real`,
:class:`Name`, ...); :func:`check_fields` is the one loop that applies them all, and
:func:`validate` runs it first, so a loaded file and a configuration changed in code or by
command-line overrides meet the same rules. Messages have one shape::

    config.<path>: <value> <what is wrong> (<valid range or choices>)

with the value's repr cut to ``MAX_REPR`` characters. Defaults and units live in the field
definitions. :func:`validate` then checks what needs more than one field: the topology
builds and its link rates are shapeable at the scale and time dilation, background load
names real machines, every job fits, policies exist and none runs twice or into another's
results directory, ECN thresholds (in bytes, or as a delay at the slowest port) lie within
the queue, and a lower bound on the wall time fits the time limit. Every run writes the
fully resolved configuration (:func:`to_dict`).

Example (``experiments/default.yaml``)::

    name: default
    seed: 1
    topology: {kind: fat_tree, k: 4, gpus_per_machine: 4, bw_mbps: 10000}
    scale: 500
    background: {h1: 2, h2: 3}
    jobs:
      - {name: resnet-a, model: resnet50, workers: 4, collective: ring}
    policies: [all]
    iterations: 10
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable
from typing import Any

import congestion
from common.errors import ConfigError, JobError, TestbedError
from experiment.config.file import MAX_FILE_BYTES as MAX_FILE_BYTES  # re-exported: the limit a message names
from experiment.config.file import read_yaml
from experiment.config.rules import (
    KEY_RE,
    KEY_RULE,
    Boolean,
    Integer,
    ListOf,
    MapOf,
    Name,
    OrNone,
    PathText,
    PolicySpec,
    Real,
    Scalar,
    Section,
    check_fields,
    fail,
    rule_field,
    show,
)
from jobs.modes import WORK_MODES, work_mode
from measure.marking import MARKING, METHODS
from measure.ports import PORT_TYPES
from sim.engines import SIM_ENGINES
from sim.flowsim import OVERLAPS, SHARINGS
from topo.schema import EMULATOR_LIMITS, SizeLimits

MODES = tuple(WORK_MODES)
RUNTIMES = ("agent", "torch")
ROUTING_MODES = ("ecmp", "select")
CONGESTION_CONTROLS = tuple(congestion.CONGESTION_CONTROLS)
"""The names of :data:`congestion.CONGESTION_CONTROLS`: Linux TCP congestion-control modules
(``tcp_<name>.ko``), whose presence is checked at run time, and the MLTCP variants the run registers itself."""


def _topology_kinds():
    from topo import TOPOLOGIES

    return TOPOLOGIES


def _models():
    from jobs.models import MODELS

    return MODELS


def _collectives():
    from jobs.collective import JOB_COLLECTIVES

    return JOB_COLLECTIVES


def _trace_collectives():
    from jobs.collective import JOB_COLLECTIVES

    return JOB_COLLECTIVES


# -- the configuration tree --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TopologyConfig:
    """Which topology to build: a registry name plus the builder's parameters (paper-scale rates).

    The builder checks its parameters' names and ranges; here each must be a finite number or a
    short string.

    Attributes:
        kind: the builder (:data:`topo.TOPOLOGIES`: ``fat_tree``, ``leaf_spine``, ``file``).
        params: the builder's parameters, written beside ``kind`` in the file.
    """

    kind: str = rule_field(Name(_topology_kinds), "fat_tree")
    params: dict = rule_field(MapOf(Name(pattern=KEY_RE, pattern_text=KEY_RULE), Scalar(), 32, "builder parameters"),
                              factory=lambda: {"k": 4}, flat=True)


@dataclasses.dataclass(frozen=True)
class JobConfig:
    """One data-parallel job: ``workers`` GPUs running ``model`` with allreduce ``collective``,
    submitted at ``arrival_s`` (paper-scale seconds from the start of the policy's run).

    ``name`` names the job's worker output files, hence :data:`~experiment.config.rules.NAME_RE`.
    ``machines`` pins it: the machine of each rank, in rank order (a machine named twice hosts two
    ranks), for the ``pinned`` policy (:mod:`placement.pinned`); other policies ignore it.

    Attributes:
        name: the job's name, unique in the experiment (it names the job's files).
        model: the model whose gradient buckets and compute time the job replays
            (:data:`jobs.models.MODELS`; ``run_testbed.py list models``).
        workers: the job's GPUs, one rank each.
        collective: its allreduce: ``ring``, ``hd`` (halving-doubling), ``gloo`` or ``ina``.
        arrival_s: when it is submitted, paper-scale seconds from the start of the policy's run.
        machines: the machine of each rank, in rank order, for the ``pinned`` policy (others ignore it).
        compute_ms: its compute time per iteration, paper-scale ms, in place of its model's (another
            GPU or batch size than the profile's); 0: the model's. Replay mode only.
    """

    name: str = rule_field(Name())
    model: str = rule_field(Name(_models))
    workers: int = rule_field(Integer(1, 100_000))
    collective: str = rule_field(Name(_collectives), "ring")
    arrival_s: float = rule_field(Real(0, 10**9), 0.0)
    machines: tuple = rule_field(ListOf(Name(), 0, 100_000, "machine names, one per rank"), factory=tuple)
    compute_ms: float = rule_field(Real(0, 10**7), 0.0)


@dataclasses.dataclass(frozen=True)
class EcnConfig:
    """ECN marking at every switch egress port, and the hosts' ECN settings.

    Thresholds are in bytes of queue at the emulated port (packets are not scaled, so a
    threshold in bytes means the same number of packets at any scale factor); set
    ``threshold_us`` instead to give K as queueing delay at the port's emulated rate.

    Attributes:
        marking: ``required`` (a run fails when no marker can run), ``optional`` (the run goes
            on and its results say ECN was not measured) or ``off``.
        method: ``auto`` (kernel RED where the kernel has it, else the BPF marker), ``red`` or ``bpf``.
        threshold_bytes: K: packets are marked while the queue exceeds it (DCTCP-style step);
            at most the queue (``queue_packets`` full-size frames) while marking is on.
        threshold_us: K as a delay; used instead of ``threshold_bytes`` when > 0. While marking
            is on, the bytes the slowest port drains in it are at most the queue.
        max_threshold_bytes: K_max for WRED-style marking: probability rises linearly from 0
            at K to ``max_probability`` at K_max, and everything above K_max is marked;
            0 means K_max = K (step marking). At most the queue while marking is on.
        max_probability: marking probability at K_max.
        sample_interval_s: period of the queue and marker counter samples.
    """

    marking: str = rule_field(Name(MARKING), "required")
    method: str = rule_field(Name(METHODS), "auto")
    threshold_bytes: int = rule_field(Integer(0, 10**9), 30000)
    threshold_us: float = rule_field(Real(0, 10_000_000), 0.0)
    max_threshold_bytes: int = rule_field(Integer(0, 10**9), 0)
    max_probability: float = rule_field(Real(0, 1, lo_open=True), 1.0)
    sample_interval_s: float = rule_field(Real(0.05, 3600), 0.25)


def _trace_formats():
    from experiment.config.traces import TRACE_FORMATS

    return ("auto", *TRACE_FORMATS)


def _netpack_pool():
    from experiment.config.traces import NETPACK_MODEL_POOL

    return tuple(NETPACK_MODEL_POOL)


@dataclasses.dataclass(frozen=True)
class TraceConfig:
    """Jobs from a cluster trace (:mod:`experiment.config.traces`) instead of a ``jobs:`` list; traces run
    on the simulator back end (``--backend sim``), whose ``fluid`` mode is built for them.

    Each trace job is one data-parallel job of ``num_gpu`` workers submitted at its (re-based)
    submission time. Its work is its trace duration taken as time on a free network: iterations =
    duration / the model's compute time per iteration (NetPack's simulator, ``docs/resolutions.md`` NetPack
    §5.3: "N = trace duration / ideal iteration time", the ideal here without any communication), so
    a job's JCT over its duration is what queueing and the network cost it.

    Attributes:
        file: the trace CSV, or a directory of CSVs of one format merged in submission order; empty: no
            trace.
        format: the trace's format (:data:`experiment.config.traces.TRACE_FORMATS`), or ``auto`` from its header.
        max_jobs: take at most this many jobs (0: all), after the window and the size filters.
        min_gpus: leave out jobs of fewer GPUs (NetPack's simulator studies distributed jobs).
        start_s: the window's start, seconds after the trace's first submission.
        span_s: the window's length, seconds (0: to the end of the trace).
        arrival_scale: every job's submission time (after the window's start) times this: below 1
            the same jobs arrive closer together (a higher offered load), above 1 further apart; 0
            submits them all at once, in their trace order.
        models: the pool a job's model is drawn from (uniformly, seeded) when the trace names none;
            NetPack's pool by default (§5.4).
        model_source: ``trace`` keeps the model a trace names (each must have a profile in
            :data:`jobs.models.MODELS`), ``pool`` draws every job's model from ``models`` (the
            model columns of the shipped ITP and Philly traces are synthetic anyway).
        collective: every trace job's allreduce.
        compute_scale: every trace job's compute time per iteration is its model's times this: the
            GPUs the trace runs on against the profiles' V100-class ones (below 1: faster GPUs, as an
            A100 about halves them). A job keeps its iterations (its trace duration at its model's own
            compute time), so its duration shrinks or grows with its compute time.
    """

    file: str = rule_field(PathText(empty=True), "")
    format: str = rule_field(Name(_trace_formats), "auto")
    max_jobs: int = rule_field(Integer(0, 10_000_000), 0)
    min_gpus: int = rule_field(Integer(1, 1_000_000), 1)
    start_s: float = rule_field(Real(0, 10**10), 0.0)
    span_s: float = rule_field(Real(0, 10**10), 0.0)
    arrival_scale: float = rule_field(Real(0, 10**6), 1.0)
    models: tuple = rule_field(ListOf(Name(_models), 1, 64, "model names"), factory=_netpack_pool)
    model_source: str = rule_field(Name(("trace", "pool")), "trace")
    collective: str = rule_field(Name(_trace_collectives), "ring")
    compute_scale: float = rule_field(Real(0, 100, lo_open=True), 1.0)


INA_USE = ("required", "optional")
INA_ENGINES = ("auto", "bmv2", "software")
INA_RESULTS = ("unicast", "multicast")  # sim.ina.RESULTS (checked by a test)
INA_MAX_SLOTS = 4096  # ina.p4.build.DEFAULT_SLOTS, the bmv2 program's register size (checked by a test)
INA_MAX_VALUES_PER_PACKET = 363  # ina.protocol.MAX_VALUES_PER_PACKET (checked by a test)


@dataclasses.dataclass(frozen=True)
class InaConfig:
    """In-network aggregation for the jobs whose ``collective`` is ``ina`` (ignored without any).

    Every INA switch gets an aggregator attached one-armed (:mod:`emulator.ina_fabric`); each INA
    job's plan (:func:`ina.plan.plan_job`) makes the ToRs holding two or more of its machines
    aggregate them, with its parameter server on the machine the placement names (``ps_host``)
    or else its rank 0's machine, and the INA switches the placement names (``ina_switches``) or
    else all of :attr:`switches`.

    Attributes:
        use: ``required`` (a run fails with one line where no engine can run) or ``optional``
            (the INA jobs then run the ``ring`` allreduce, and the results say INA was not used).
        engine: ``auto`` (bmv2 where its toolchain runs here, else the software engine), ``bmv2``
            or ``software``.
        slots: aggregator slots in use at every switch: a power of two up to the bmv2
            program's registers (:data:`INA_MAX_SLOTS`).
        switches: the INA-capable switches; empty: every ToR (a switch with machines).
        pat_gbps: the Peak Aggregation Throughput of every INA switch, paper-scale Gbit/s of INA
            frames (NetPack spec §1.6: its memory as a rate; 0: it sums nothing). The simulator
            models it, 1 Tb/s when not given (the NetPack simulator's, §5.3; :attr:`model_pat_gbps`).
            On the emulator a declared PAT is a requirement: mapped as links are (divided by the
            scale and the dilation), each aggregator must take it, or what its links can bring
            where that is less, and a run whose engine cannot is refused in one line naming the
            dilation that would carry it (``use: optional``: said, and run); not given, the
            aggregators sum what they can.
        results: how results reach the workers: ``unicast`` (the PS sends each machine its own) or
            ``multicast`` (ATP's switch multicast, as NetPack models it: the PS sends one result per
            seq and the aggregating switches copy it to their children, :mod:`ina.plan`). Both back
            ends run both (:mod:`sim.ina` models them).
        values_per_packet: int32 values each INA packet carries (1 to 363, a 1,500-byte MTU): the
            workers cut their buckets into packets of this many, every aggregator is built for it
            (the bmv2 program compiled with as many value registers per slot) and the wire carries
            a 62-byte header per packet.
    """

    use: str = rule_field(Name(INA_USE), "required")
    engine: str = rule_field(Name(INA_ENGINES), "auto")
    slots: int = rule_field(Integer(1, INA_MAX_SLOTS), 1024)
    switches: tuple = rule_field(ListOf(Name(), 0, 65_534, "switch names"), ())
    pat_gbps: float | None = rule_field(OrNone(Real(0, 10**9), "the simulator's 1 Tb/s; the emulator's engine"),
                                        None)
    results: str = rule_field(Name(INA_RESULTS), "unicast")
    values_per_packet: int = rule_field(Integer(1, INA_MAX_VALUES_PER_PACKET), 256)

    @property
    def model_pat_gbps(self) -> float:
        """The PAT the simulator and the network-aware policies model: the declared one, else 1 Tb/s."""
        from placement.netpack.network import DEFAULT_PAT_GBPS

        return DEFAULT_PAT_GBPS if self.pat_gbps is None else self.pat_gbps


CONTAINER_ENGINES = ("none", "docker")


@dataclasses.dataclass(frozen=True)
class ContainerConfig:
    """Whether the emulator's workers run in containers (:mod:`emulator.containers`).

    Attributes:
        engine: ``none`` (each worker, or each machine's agent, is a process in its emulated
            machine's network namespace) or ``docker`` (each is a container of the locally
            built worker image, :mod:`emulator.worker_image`, in that namespace). The simulator
            ignores it.
        cpus: CPU limit of each container (``docker run --cpus``), in cores.
    """

    engine: str = rule_field(Name(CONTAINER_ENGINES), "none")
    cpus: float = rule_field(Real(0.01, 1024), 1.0)


LOCAL_NAMES = ("localhost", "127.0.0.1")


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """Spread the emulated network over several servers (:mod:`emulator.cluster`: Mininet's cluster
    edition, nodes over SSH, links between servers as SSH tunnels).

    Attributes:
        servers: the other servers, as ``ssh`` knows them (host names, addresses or ``Host``
            entries of ``ssh_config``); empty: this machine alone. Racks (leaf-spine) or pods
            (fat-tree) are spread evenly over this machine and them; the core or spine switches
            stay here.
        user: the user on every server (root; Mininet and tc need it).
        ssh_config: an ``ssh_config`` file for every connection (``ssh -F``); empty for the
            user's own.
        connect_timeout_s: how long a server may take to answer, seconds.
    """

    servers: tuple = rule_field(ListOf(Name(), 0, 63, "server names"), ())
    user: str = rule_field(Name(), "root")
    ssh_config: str = rule_field(PathText(empty=True), "")
    connect_timeout_s: float = rule_field(Real(1, 600), 10.0)


@dataclasses.dataclass(frozen=True)
class PreemptionConfig:
    """What preempting a job costs: Tiresias's checkpoint and restore
    (:mod:`experiment.run.preemption`). A preempted job holds its GPUs until its checkpoint is
    written; a resumed one holds them, making no progress and attaining no service, until it is
    read back. Every field 0 (the default): a preemption costs nothing.

    Attributes:
        checkpoint_s: fixed time of a checkpoint (the job paused, its chief writing the model),
            seconds, on top of the model's bytes at ``storage_gbytes_s``.
        restore_s: fixed time of a restore (the framework restarted, every worker loading the
            model), seconds, on top of the model's bytes at ``storage_gbytes_s``.
        storage_gbytes_s: the shared storage's rate for the model's fp32 parameters, GB/s, each way
            (Tiresias's testbed: GPFS at 1.2 per machine); 0: the bytes cost nothing.
    """

    checkpoint_s: float = rule_field(Real(0, 1_000_000), 0.0)
    restore_s: float = rule_field(Real(0, 1_000_000), 0.0)
    storage_gbytes_s: float = rule_field(Real(0, 1_000_000), 0.0)


SIM_MODES = tuple(SIM_ENGINES)


@dataclasses.dataclass(frozen=True)
class SimulatorConfig:
    """What the flow-level simulator (:mod:`sim.flowsim`) models when it estimates every job of a
    run on the same placements; each effect can be switched on to measure what it explains.

    Attributes:
        latency_us: software latency of every cross-machine message, paper-scale (virtual)
            microseconds: the time a message waits before entering the network (0: none).
        headers: count every segment's TCP/IP and Ethernet headers at the run's MTU (as the
            emulated wire carries them), or payload only.
        token_buckets: model the emulated links' token-bucket shapers (a link idle long enough
            passes one bucket, ``measure.shaping.burst_bytes``, at once): an effect of the
            emulator, not of the network it models, so off by default.
        ecn: estimate every job's ECN-marked packets (a port's queue taken to be above K while
            its link is saturated by two flows or more; :mod:`sim.ecn_marks`).
        ecn_mark_share: the share of the packets crossing such a link that the estimate counts as
            marked (1: all of them, an upper bound); the default, 0.05, is the share measured on
            the emulator's contended jobs (``docs/validation.md``), ``calibrate`` fits a run's.
        mode: ``steps`` follows every transfer of every step (:mod:`sim.flowsim`: the model the
            testbed validates); ``fluid`` advances each job by its iteration rate under the
            water-filled share of its links (:mod:`sim.fluid`: trace scale; no token buckets, no
            ECN estimate), and is what the ``--backend sim`` run of a trace uses.
        overlap: how the ``fluid`` engine has jobs that share links overlap their communication:
            ``independent`` (the default, measured nearer the emulator and the step-level engine:
            each meets the others' traffic for the share of time they communicate; :mod:`sim.fluid`)
            or ``together`` (always; NetPack's model, pessimistic where jobs take turns). The
            ``steps`` engine follows every transfer and ignores it.
        sharing: how the ``steps`` engine's flows share a link they saturate together: ``tcp``
            (the default) at ``tcp_efficiency`` of its rate, or ``maxmin`` at all of it (the
            literature's model; :mod:`sim.sharing`). An MLTCP run's weights replace either.
        tcp_efficiency: the share of its rate a link saturated by two TCP flows or more carries
            under ``sharing: tcp``; the default, 0.9, is measured on the emulator's contended jobs
            (``docs/validation.md``), ``calibrate`` fits a run's.
        mltcp_step: under an MLTCP congestion control, the ``steps`` engine re-weighs a flow sharing
            links each time its progress through its iteration's bytes crosses a multiple of this
            fraction (:class:`sim.mltcp.MltcpFlows`); its shares lag by at most this much.
    """

    latency_us: float = rule_field(Real(0, 1_000_000), 0.0)
    headers: bool = rule_field(Boolean(), True)
    token_buckets: bool = rule_field(Boolean(), False)
    ecn: bool = rule_field(Boolean(), False)
    ecn_mark_share: float = rule_field(Real(0, 1, lo_open=True), 0.05)
    mode: str = rule_field(Name(SIM_MODES), "steps")
    overlap: str = rule_field(Name(OVERLAPS), "independent")
    mltcp_step: float = rule_field(Real(0, 1, lo_open=True), 0.01)
    sharing: str = rule_field(Name(SHARINGS), "tcp")
    tcp_efficiency: float = rule_field(Real(0, 1, lo_open=True), 0.9)


@dataclasses.dataclass(frozen=True)
class TimeShiftConfig:
    """How a time-shifted job (Cassini's time shifts) is kept in phase on both
    back ends (:class:`jobs.phase.PhaseKeeper`): it counts as drifted when ``drift_window``
    iterations in a row start more than ``max(drift_floor_ms, drift_fraction x its iteration
    time)`` from their aligned instants (paper-scale ms), and is then re-aligned unless
    ``realign`` is false (its phase errors are measured either way). With ``pace`` (the default)
    a decision's jobs keep one common line that runs at its slowest job's pace and follows its
    latest one (:mod:`jobs.pace`): an early job waits at once, one late by half the threshold sets
    the line back, and the line restretches when the slowest pace changes by more than
    ``pace_tolerance``; without it each job keeps the wall clock alone and waits for its next
    instant after a window of drift.

    Attributes:
        drift_floor_ms: the smallest drift that counts, paper-scale ms.
        drift_fraction: the drift that counts as a fraction of the job's iteration time, when larger.
        drift_window: iterations in a row beyond the threshold that make a job drifted.
        realign: re-align a drifted job (its phase errors are measured either way).
        pace: keep a decision's jobs on one common line at the slowest job's pace.
        pace_tolerance: the relative change of the slowest pace that restretches the line.
    """

    drift_floor_ms: float = rule_field(Real(0, 1_000_000), 2.0)
    drift_fraction: float = rule_field(Real(0, 1), 0.02)
    drift_window: int = rule_field(Integer(1, 100_000), 10)
    realign: bool = rule_field(Boolean(), True)
    pace: bool = rule_field(Boolean(), True)
    pace_tolerance: float = rule_field(Real(0, 1), 0.001)

    def rule(self):
        """The :class:`jobs.phase.DriftRule` of this section."""
        from jobs.phase import DriftRule

        return DriftRule(self.drift_floor_ms / 1000.0, self.drift_fraction, self.drift_window, self.realign,
                         self.pace, self.pace_tolerance)


@dataclasses.dataclass(frozen=True)
class CassiniConfig:
    """Cassini's inputs beyond its policy spec (``cassini,inner=...``).

    Attributes:
        profiles: a ``profiles.json`` of jobs' iteration and Up times measured alone
            (``.venv/bin/python -m experiment.reporting.profiles``); a job named there is profiled with its measured
            times instead of its model's (§2.4). Empty: every job from its model.
    """

    profiles: str = rule_field(PathText(empty=True), "")

    def timings(self) -> dict[str, tuple[float, float]]:
        """The measured timings of ``profiles``, job -> ``(iter_ms, up_ms)`` (empty without a file).

        Raises:
            ConfigError: the file cannot be read as measured timings.
        """
        if not self.profiles:
            return {}
        from placement.cassini.profiles import read_timings

        try:
            return read_timings(self.profiles)
        except ValueError as e:
            raise ConfigError(f"config.cassini.profiles: {e}") from None


@dataclasses.dataclass(frozen=True)
class MltcpConfig:
    """MLTCP's parameters, used when ``congestion_control`` is an
    MLTCP variant (:class:`congestion.Mltcp`).

    Attributes:
        slope: ``F(bytes_ratio) = slope × bytes_ratio + intercept`` scales each flow's window growth
            (Reno's additive increase; CUBIC's per-ACK increment and Reno-friendly estimate).
        intercept: F's value at the start of an iteration; above 0, so that a flow starting its
            iteration is never starved.
        idle_gap_ms: a flow that sends again after this long without an ACK starts a new iteration
            (the idle-gap rule); paper-scale (virtual) ms, dilated on the emulator. Above the RTT and
            the pauses between a collective's steps, below the compute phase.
    """

    slope: float = rule_field(Real(0, 1000), 1.0)
    intercept: float = rule_field(Real(0, 1000, lo_open=True), 1.0)
    idle_gap_ms: float = rule_field(Real(0, 100_000, lo_open=True), 20.0)


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """A whole experiment.

    Attributes:
        name: experiment name, used in the results directory name.
        seed: one seed; named sub-streams are derived from it.
        topology: the fabric.
        scale: time-preserving scale factor: emulated rate = paper rate / scale, emulated
            bytes = paper bytes / scale.
        dilation: time dilation factor D (>= 1): link rates are divided by D on top of scale,
            emulated compute and timeouts multiplied by D, reported times divided by D, so
            reports stay in paper-scale seconds; it costs D times the wall time of the measured
            iterations.
        background: busy GPUs per machine before any job is placed (non-idle machines).
        jobs: the job mix, each submitted at its ``arrival_s``.
        trace: jobs from a cluster trace instead (simulator back end only).
        scheduler: scheduler spec string (``scheduling.SCHEDULERS``): which arrived jobs hold GPUs
            and which are preempted; the default ``waves`` starts the jobs that fit together and
            the others when that whole wave has ended.
        preemption: what preempting a job costs (checkpoint and restore; nothing by default).
        policies: placement policy spec strings, or ``[all]`` for every registered policy; after
            expanding ``all`` no policy may appear twice.
        iterations: recorded training iterations per job.
        warmup_iterations: iterations run before recording starts.
        mode: worker mode, ``replay`` (model profile buckets, emulated compute) or ``train``
            (real DDP training of a small model).
        runtime: how replay ranks run: ``agent`` (one light process per machine running all of
            its ranks over plain TCP, no torch; :mod:`workers.agent`) or ``torch`` (one gloo
            process per rank, :mod:`workers.worker`; gloo's own allreduce runs for real instead
            of its mirrored-ring model). ``train`` mode always runs one torch process per rank.
        mtu: MTU on every emulated interface, bytes (up to 9000, jumbo frames).
        switch_ports: how switch ports reach the userspace datapath: ``auto`` (AF_XDP where it
            runs, else plain veths), ``afxdp`` (an error where it cannot run) or ``system``;
            see :mod:`emulator.ports`. ``auto`` takes plain veths where AF_XDP ports would not fit
            in the memory available (:mod:`measure.footprint`).
        memory_check: refuse to start a network predicted not to fit in the machine's available
            memory (:mod:`measure.footprint`); ``false`` starts it anyway.
        routing: controller routing mode, ``ecmp`` (deterministic, simulator-predictable) or
            ``select`` (OVS per-flow hashing).
        queue_packets: FIFO limit under each switch port's shaper, packets (the switch's buffer).
        host_queue_packets: FIFO limit under each machine's own shaper (its NIC), packets: deep
            enough that TCP does not overflow it, as a real host's TCP is held back before its
            NIC's queue drops (Linux's default ``txqueuelen``). A shallower one drops the
            machine's own packets, and a ring that chains its transfers waits for every
            retransmission behind the full queue.
        congestion_control: TCP congestion control in the hosts, one of
            :data:`CONGESTION_CONTROLS`; it must react to ECN (cubic, reno, dctcp, ...; not bbr)
            unless ECN marking is off. ``mltcp_reno`` and ``mltcp_cubic`` are MLTCP (registered for
            the run).
        cassini: Cassini's measured profiles, for ``cassini`` policies.
        mltcp: MLTCP's parameters, for ``congestion_control: mltcp_reno`` or ``mltcp_cubic``.
        time_shifts: how time-shifted jobs are kept in phase (drift threshold, window, re-alignment).
        ecn: ECN marking and host ECN settings.
        ina: in-network aggregation for jobs of collective ``ina``.
        container: workers as processes or in Docker containers (emulator only).
        cluster: the servers the emulated network is spread over (emulator only).
        simulator: what the flow-level simulator models in its per-job estimates.
        stats_interval_s: port statistics polling period.
        job_timeout_s: a wave of jobs that runs longer than this fails; in paper-scale
            (virtual) seconds, so the wall-clock timeout of a wave is ``job_timeout_s * dilation``.
        time_limit_s: wall-clock budget of the whole experiment in seconds; :func:`validate`
            rejects a configuration whose lower-bound wall-time estimate (see
            :func:`wall_time_lower_bound_s`) exceeds it.
        results_dir: where ``<timestamp>-<name>/`` run directories go.
        plots: draw the run's PNG plots as it ends; ``false`` writes its tables, CSV and JSON only
            (``run_testbed.py report RUN_DIR`` draws its plots from those files later, all but
            ``queues.png``).
    """

    name: str = rule_field(Name(), "experiment")
    seed: int = rule_field(Integer(0, 2**32 - 1), 1)
    topology: TopologyConfig = rule_field(Section(TopologyConfig), factory=TopologyConfig)
    scale: float = rule_field(Real(0, 10_000_000, lo_open=True), 500.0)
    dilation: float = rule_field(Real(1, 10_000, note="1 = no dilation"), 3.0)
    background: dict = rule_field(MapOf(Name(), Integer(0, 4096), 65_534, "machine -> busy GPUs"), factory=dict)
    jobs: tuple = rule_field(ListOf(Section(JobConfig), 0, 1000, "jobs"), ())
    trace: TraceConfig = rule_field(Section(TraceConfig), factory=TraceConfig)
    policies: tuple = rule_field(ListOf(PolicySpec(), 1, 64, "policy specs"), ("all",))
    scheduler: str = rule_field(PolicySpec("scheduler"), "waves")
    preemption: PreemptionConfig = rule_field(Section(PreemptionConfig), factory=PreemptionConfig)
    iterations: int = rule_field(Integer(1, 100_000), 10)
    warmup_iterations: int = rule_field(Integer(0, 100_000), 2)
    mode: str = rule_field(Name(MODES), "replay")
    runtime: str = rule_field(Name(RUNTIMES), "agent")
    mtu: int = rule_field(Integer(576, 9000), 1500)
    switch_ports: str = rule_field(Name(PORT_TYPES), "auto")
    memory_check: bool = rule_field(Boolean(), True)
    routing: str = rule_field(Name(ROUTING_MODES), "ecmp")
    queue_packets: int = rule_field(Integer(1, 100_000), 100)
    host_queue_packets: int = rule_field(Integer(1, 100_000), 1000)
    congestion_control: str = rule_field(Name(CONGESTION_CONTROLS), "cubic")
    ecn: EcnConfig = rule_field(Section(EcnConfig), factory=EcnConfig)
    ina: InaConfig = rule_field(Section(InaConfig), factory=InaConfig)
    container: ContainerConfig = rule_field(Section(ContainerConfig), factory=ContainerConfig)
    cluster: ClusterConfig = rule_field(Section(ClusterConfig), factory=ClusterConfig)
    simulator: SimulatorConfig = rule_field(Section(SimulatorConfig), factory=SimulatorConfig)
    cassini: CassiniConfig = rule_field(Section(CassiniConfig), factory=CassiniConfig)
    mltcp: MltcpConfig = rule_field(Section(MltcpConfig), factory=MltcpConfig)
    time_shifts: TimeShiftConfig = rule_field(Section(TimeShiftConfig), factory=TimeShiftConfig)
    stats_interval_s: float = rule_field(Real(0.05, 3600), 0.5)
    job_timeout_s: float = rule_field(Real(1, 10_000_000), 300.0)
    time_limit_s: float = rule_field(Real(0, 10_000_000, lo_open=True), 3600.0)
    results_dir: str = rule_field(PathText(), "results")
    plots: bool = rule_field(Boolean(), True)


def load(path: str) -> ExperimentConfig:
    """Read and strictly parse a YAML experiment file (types and ranges are :func:`validate`'s); a
    relative path it gives (:class:`~experiment.config.rules.PathText`) is relative to its directory,
    and comes out absolute.

    Raises:
        ConfigError: the file cannot be read, is too large, not UTF-8, not YAML, too deeply
            nested, expands to too many values, repeats a key, or has an unknown or missing key.
    """
    return from_dict(read_yaml(path), os.path.dirname(os.path.abspath(path)))


def _reject_unknown(data: dict, cls, where: str) -> None:
    names = [f.name for f in dataclasses.fields(cls)]
    for key in data:
        if key not in names:
            hint = difflib.get_close_matches(key, names, n=1) if isinstance(key, str) and len(key) <= 64 else []
            extra = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ConfigError(f"{where}: unknown key {show(key)}{extra}; valid keys: {', '.join(names)}")


def _build(cls, data: Any, where: str, base_dir: str | None = None):
    """A configuration dataclass from a mapping: keys only (unknown or missing), nested sections
    built too and lists made tuples; types and ranges are :func:`check_fields`'s. A relative path
    given (:class:`~experiment.config.rules.PathText`) is joined to ``base_dir`` when one is given."""
    if not isinstance(data, dict):
        fail(where, data, "is not a mapping", f"keys: {', '.join(f.name for f in dataclasses.fields(cls))}")
    _reject_unknown(data, cls, where)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{where}: missing required key {f.name!r}")
            continue
        value, rule, at = data[f.name], f.metadata["rule"], f"{where}.{f.name}"
        if isinstance(rule, Section):
            value = _build(rule.cls, value, at, base_dir)
        elif isinstance(rule, ListOf) and isinstance(rule.item, Section) and isinstance(value, list):
            value = tuple(_build(rule.item.cls, v, f"{at}[{i}]", base_dir) for i, v in enumerate(value))
        elif isinstance(rule, PathText):
            value = _absolute(value, base_dir)
        elif isinstance(rule, ListOf) and isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def _absolute(value: Any, base_dir: str | None) -> Any:
    """``value`` joined to ``base_dir`` when it is a relative path and a base is given; else as it is."""
    if base_dir is None or not isinstance(value, str) or not value or os.path.isabs(value):
        return value
    return os.path.normpath(os.path.join(base_dir, value))


def absolute_paths(cfg: ExperimentConfig, base_dir: str) -> ExperimentConfig:
    """``cfg`` with every relative path in it joined to ``base_dir``: what a run writes as its
    ``config.json``, so that the file repeats the run from any directory. Rebuilt from its dict form
    (:func:`to_dict`), where every field is given, by :func:`from_dict`'s own path rule."""
    return from_dict(to_dict(cfg), base_dir)


def from_dict(data: Any, base_dir: str | None = None) -> ExperimentConfig:
    """Build a configuration from parsed YAML, strictly: an unknown or missing key is an error.

    Types and ranges are checked by :func:`validate` (:func:`check_fields`). With ``base_dir``, the
    relative paths given (the fields of :class:`~experiment.config.rules.PathText` rule, and a file
    topology's ``path``) are joined to it.
    """
    if not isinstance(data, dict):
        raise ConfigError("config: the top level must be a mapping of keys to values")
    data = dict(data)
    topo = data.get("topology")
    if topo is not None:
        if not isinstance(topo, dict) or "kind" not in topo:
            raise ConfigError("config.topology: expected a mapping with a 'kind' key, e.g. {kind: fat_tree, k: 4}")
        params = {k: v for k, v in topo.items() if k != "kind"}
        if "path" in params:  # a topology read from a file (topo.build_topology("file", path=...))
            params["path"] = _absolute(params["path"], base_dir)
        data["topology"] = {"kind": topo["kind"], "params": params}
    if isinstance(data.get("policies"), str):
        data["policies"] = [data["policies"]]
    return _build(ExperimentConfig, data, "config", base_dir)


def to_dict(cfg: ExperimentConfig) -> dict:
    """The fully resolved configuration, JSON-serialisable and loadable again by :func:`load`.

    A run's ``config.json`` is therefore itself a config file (JSON is YAML) that repeats the run.
    """
    d = dataclasses.asdict(cfg)
    d["topology"] = {"kind": cfg.topology.kind, **cfg.topology.params}
    d["jobs"] = [dataclasses.asdict(j) for j in cfg.jobs]
    d["policies"] = list(cfg.policies)
    d["ecn"] = dataclasses.asdict(cfg.ecn)
    d["ina"] = {**dataclasses.asdict(cfg.ina), "switches": list(cfg.ina.switches)}
    d["simulator"] = dataclasses.asdict(cfg.simulator)
    d["trace"] = {**dataclasses.asdict(cfg.trace), "models": list(cfg.trace.models)}
    d["cluster"] = {**dataclasses.asdict(cfg.cluster), "servers": list(cfg.cluster.servers)}
    return d


def policy_specs(cfg: ExperimentConfig) -> list[str]:
    """The policy spec strings to run, with ``all`` expanded to every registered policy."""
    from placement import POLICIES

    out = []
    for p in cfg.policies:
        out.extend(sorted(POLICIES) if p == "all" else [p])
    return out


def wall_time_lower_bound_s(cfg: ExperimentConfig) -> float:
    """A lower bound on the wall time of the whole experiment, in seconds.

    Every policy runs each job's warm-up and measured iterations at least once, no job starts
    before its ``arrival_s``, and the emulated compute of one iteration alone takes
    ``compute_time_s * dilation`` of wall time; jobs of one policy may run in parallel,
    policies one after another. Hence at least::

        len(policy_specs(cfg)) * max over jobs of
            (arrival_s + (warmup_iterations + iterations) * compute_time_s) * dilation

    Communication, waiting for GPUs, setup and teardown only add to it. Pure: no I/O.

    Args:
        cfg: the configuration; its models must exist.

    Returns:
        The bound in wall-clock seconds (0 when there are no jobs).

    Raises:
        JobError: when a job names an unknown model.
    """
    return len(policy_specs(cfg)) * latest_end_s(cfg) * cfg.dilation


def latest_end_s(cfg: ExperimentConfig) -> float:
    """The latest any job can end alone, virtual seconds: its arrival plus its iterations' compute."""
    from jobs.models import job_model

    iterations = cfg.warmup_iterations + cfg.iterations
    return max((j.arrival_s + iterations * job_model(j.model, j.compute_ms).compute_time_s for j in cfg.jobs),
               default=0.0)


# -- validation: what needs more than one field --------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BackendChecks:
    """What one back end checks of a config on top of what every back end checks (:func:`validate`):
    the ``checks`` of its :class:`experiment.run.plugin.ExperimentBackend`.

    Attributes:
        shaped: its links must be rates the emulator can shape.
        fields: checks of the config alone, before the topology is built.
        topology: checks of the config against its topology, before the jobs'.
        ina: checks of a config with INA jobs (``who`` names them), before the common ones.
        last: checks after every common one (the wall time of the whole run).
        describe: what ``run_testbed.py check`` adds about a valid config on this back end.
        limits: the largest topology it takes (:class:`topo.schema.SizeLimits`).
    """

    shaped: bool
    fields: tuple[Callable[[ExperimentConfig], None], ...] = ()
    topology: tuple[Callable[[ExperimentConfig, Any], None], ...] = ()
    ina: tuple[Callable[[ExperimentConfig, str], None], ...] = ()
    last: tuple[Callable[[ExperimentConfig], None], ...] = ()
    describe: Callable[[ExperimentConfig, Any], str] = lambda cfg, g: ""
    limits: SizeLimits = EMULATOR_LIMITS


def validate(cfg: ExperimentConfig, backend: str = "emu"):
    """:func:`validate_for` the back end registered as ``backend`` (``experiment.BACKENDS``): its
    :attr:`~experiment.run.plugin.ExperimentBackend.checks`.

    Raises:
        ConfigError: naming the offending value and the valid choices (or an unknown back end).
    """
    from experiment import backend_class

    return validate_for(cfg, backend_class(backend).checks)


def validate_for(cfg: ExperimentConfig, checks: BackendChecks):
    """Check every field (:func:`check_fields`), then what needs several fields, the registries and
    the topology (within the back end's size limits), and what the back end checks of its own
    (``checks``); everything a run would reject for the configuration alone is rejected here.

    Returns:
        The topology graph the configuration describes.

    Raises:
        ConfigError: naming the offending value and the valid choices.
    """
    cfg = check_fields(cfg)
    for check in checks.fields:
        check(cfg)
    g, free = _validate_topology(cfg, checks.shaped, checks.limits)
    for check in checks.topology:
        check(cfg, g)
    _validate_ina(cfg, g, checks)
    _set_pat(cfg, g)
    if cfg.trace.file:
        _validate_trace(cfg, free)
    else:
        _validate_jobs(cfg, free, g)
    _validate_policies(cfg)
    _validate_scheduler(cfg)
    cfg.cassini.timings()  # the measured profiles, when given, read as such
    for check in checks.last:
        check(cfg)
    return g


def _validate_topology(cfg: ExperimentConfig, shaped: bool = True, limits: SizeLimits = EMULATOR_LIMITS):
    """Build the topology and its cluster with the background load; returns the graph and the free GPUs."""
    from measure.shaping import link_rates_mbps
    from placement.base import Cluster
    from topo import build_topology

    try:
        g = build_topology(cfg.topology.kind, limits=limits, **cfg.topology.params)
        if shaped:
            link_rates_mbps(g, cfg.scale, cfg.dilation)
    except TestbedError as e:
        raise ConfigError(f"config.topology: {e}") from None
    except (TypeError, ValueError) as e:  # a parameter of the right shape but not what the builder can use
        raise ConfigError(f"config.topology: {cfg.topology.kind} cannot use its parameters: {str(e)[:200]}") from None
    delayed = sorted({d["delay_us"] for _, _, d in g.edges(data=True) if d.get("delay_us", 0) > 0})
    if delayed:
        # Neither back end gives a link propagation delay: refused rather than silently ignored.
        raise ConfigError(f"config.topology: links with delay_us {', '.join(f'{x:g}' for x in delayed[:3])}: "
                          "link propagation delay is neither emulated nor simulated; set delay_us to 0 (the "
                          "simulator's per-message latency is simulator.latency_us)")
    for m, busy in cfg.background.items():
        _check_machine("config.background", m, g)
        if busy > g.nodes[m]["gpus"]:
            fail(f"config.background.{m}", busy, "is more GPUs than the machine has",
                 f"an integer in [0, {g.nodes[m]['gpus']}]")
    cluster = Cluster.from_topology(g)
    cluster.set_background(cfg.background)
    return g, cluster.view().total_free


def _check_machine(where: str, m: str, g) -> None:
    """``m`` is a machine of topology ``g``, else a ConfigError at ``where`` listing some of them."""
    from topo import machines

    if m not in g or g.nodes[m].get("role") != "machine":
        names = machines(g)
        fail(where, m, "is not a machine of the topology",
             f"machines: {', '.join(names[:3])} ... {names[-1]}" if len(names) > 4 else ", ".join(names))


def _validate_trace(cfg: ExperimentConfig, free: int) -> None:
    """A trace replaces the jobs list and must yield a job that fits."""
    from experiment.config.workload import trace_jobs

    if cfg.jobs:
        raise ConfigError(f"config.trace: a trace ({cfg.trace.file}) and a jobs list ({len(cfg.jobs)} jobs) are "
                          "both given; give one")
    t = cfg.trace
    if not trace_jobs(cfg, free):
        raise ConfigError(f"config.trace: no job of {t.file} in the window start_s {t.start_s:g} s, span_s "
                          f"{t.span_s:g} s fits the cluster's {free} free GPUs")


def _validate_pins(where: str, job: JobConfig, g) -> None:
    """A pinned job names one machine of the topology per rank, no machine more times than it has GPUs."""
    if not job.machines:
        return
    if len(job.machines) != job.workers:
        fail(where, list(job.machines), f"names {len(job.machines)} machine(s) for {job.workers} workers",
             "one machine per rank, in rank order")
    for m in dict.fromkeys(job.machines):
        _check_machine(where, m, g)
        if job.machines.count(m) > g.nodes[m]["gpus"]:
            fail(where, m, f"hosts {job.machines.count(m)} ranks but has {g.nodes[m]['gpus']} GPUs",
                 "at most one rank per GPU")


def _validate_jobs(cfg: ExperimentConfig, free: int, g) -> None:
    if not cfg.jobs:
        raise ConfigError("config.jobs: 0 jobs given (a list of 1 to 1000 jobs, or a trace: section)")
    names, mode = set(), work_mode(cfg.mode)
    for i, j in enumerate(cfg.jobs):
        where = f"config.jobs[{i}]"
        if j.name in names:
            fail(f"{where}.name", j.name, "is a duplicate job name", "job names are unique")
        names.add(j.name)
        if j.workers > free:
            raise ConfigError(f"config.jobs: job {j.name!r} needs {j.workers} GPUs but the cluster has only "
                              f"{free} free (after background load); it can never be placed")
        _validate_pins(f"{where}.machines", j, g)
        try:
            mode.check_model(j.model, f"job {j.name!r}")
        except JobError as e:
            raise ConfigError(f"config.jobs: {e}") from None
        if mode.trains and j.compute_ms > 0:
            fail(f"{where}.compute_ms", j.compute_ms, "sets a replayed compute time, but mode 'train' computes",
                 "0 (the model's) in mode 'train'")


def ina_jobs(cfg: ExperimentConfig) -> list[str]:
    """The jobs whose collective aggregates in the fabric (``ina``), in config order."""
    from jobs.collective import collective_of

    return [j.name for j in cfg.jobs if collective_of(j.collective).aggregates_in_fabric]


def ina_switches(cfg: ExperimentConfig, g) -> tuple[str, ...]:
    """The INA-capable switches: ``ina.switches``, or every ToR (a switch with machines), sorted."""
    return tuple(sorted(cfg.ina.switches or _tors(g)))


def _tors(g) -> set[str]:
    """The switches with machines (every machine's ``rack``)."""
    return {d["rack"] for d in g.nodes.values() if d.get("role") == "machine"}


def _set_pat(cfg: ExperimentConfig, g) -> None:
    """Give every INA switch of ``g`` the config's PAT (``ina.pat_gbps``), the switches' memory as
    the simulator models it and as NetPack and the baselines that estimate the steady state read
    it by default (:data:`placement.netpack.network.PAT_ATTRIBUTE`)."""
    from placement.netpack.network import PAT_ATTRIBUTE

    for s in ina_switches(cfg, g):
        g.nodes[s][PAT_ATTRIBUTE] = float(cfg.ina.model_pat_gbps)


def _validate_ina(cfg: ExperimentConfig, g, checks: BackendChecks) -> None:
    """INA jobs run on the emulator (either mode, either runtime, either results) and on the
    simulator's fluid engine (:mod:`sim.ina`), with a power-of-two slot pool on ToRs of the topology."""
    from jobs.collective import collective_of

    names = ina_jobs(cfg)
    traced = bool(cfg.trace.file) and collective_of(cfg.trace.collective).aggregates_in_fabric
    if not names and not traced:
        return
    who = f"job {names[0]!r}" if names else f"every job of trace {cfg.trace.file}"
    for check in checks.ina:
        check(cfg, who)
    slots = cfg.ina.slots
    if slots & (slots - 1):
        fail("config.ina.slots", slots, "is not a power of two", f"1, 2, 4, ... {INA_MAX_SLOTS}")
    tors = _tors(g)
    for s in cfg.ina.switches:
        if s not in tors:
            fail("config.ina.switches", s, "is not a switch with machines (a ToR) of the topology",
                 f"ToRs: {', '.join(sorted(tors)[:6])}{' ...' if len(tors) > 6 else ''}")
    if len(set(cfg.ina.switches)) != len(cfg.ina.switches):
        raise ConfigError("config.ina.switches: a switch is listed twice")
    ip_bytes = 20 + 8 + 20 + 4 * cfg.ina.values_per_packet  # IPv4, UDP, the INA header, the values
    if ip_bytes > cfg.mtu:
        fail("config.ina.values_per_packet", cfg.ina.values_per_packet,
             f"makes {ip_bytes}-byte IP packets, above config.mtu {cfg.mtu}",
             f"at most {(cfg.mtu - 48) // 4} values per packet, or a larger mtu")


def _validate_policies(cfg: ExperimentConfig) -> None:
    """Every spec builds, none runs twice (it would run again into the same directory), and no two
    share a results directory (:func:`common.specs.safe_name` names it, turning ',' into '_')."""
    from common.specs import safe_name
    from placement import POLICIES, make_policy, parse_spec

    specs = policy_specs(cfg)
    seen = set()
    directories: dict[str, str] = {}  # results directory name -> the spec that has it
    for spec in specs:
        try:
            name, kwargs = parse_spec(spec)
            make_policy(spec, seed=cfg.seed)
        except TestbedError as e:
            raise ConfigError(f"config.policies: {e}") from None
        key = (name, tuple(sorted(kwargs.items())))
        if key in seen:
            expanded = f"; 'all' is {', '.join(sorted(POLICIES))}" if "all" in cfg.policies else ""
            fail("config.policies", spec, "would run twice, into one directory", f"list each policy once{expanded}")
        seen.add(key)
        other = directories.setdefault(safe_name(spec), spec)
        if other != spec:
            fail("config.policies", spec, f"would write into the results directory {safe_name(spec)!r} of "
                 f"{show(other)}", "each spec needs its own directory; ',' and spaces become '_' in its name")


def _validate_scheduler(cfg: ExperimentConfig) -> None:
    from scheduling import make_scheduler

    try:
        make_scheduler(cfg.scheduler, seed=cfg.seed)
    except TestbedError as e:
        raise ConfigError(f"config.scheduler: {e}") from None
