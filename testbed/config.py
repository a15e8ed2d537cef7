"""Experiment configuration: a tree of frozen dataclasses loaded strictly from YAML.

Unknown keys are errors with a "did you mean" hint; defaults and units live in the field
definitions; :func:`validate` checks everything that can be checked without root (topology
builds, models, collectives and policies exist, every job fits in the cluster, link rates
are shapeable at the scale and time dilation, and a lower bound on the wall time fits the
time limit). Every run writes the fully resolved configuration (:func:`to_dict`).

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
import math
import typing
from typing import Any

import yaml

from common.errors import ConfigError, TestbedError


@dataclasses.dataclass(frozen=True)
class TopologyConfig:
    """Which topology to build: a registry name plus the builder's parameters (paper-scale rates)."""

    kind: str = "fat_tree"
    params: dict = dataclasses.field(default_factory=lambda: {"k": 4})


@dataclasses.dataclass(frozen=True)
class JobConfig:
    """One data-parallel job: ``workers`` GPUs running ``model`` with allreduce ``collective``."""

    name: str
    model: str
    workers: int
    collective: str = "ring"


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
        threshold_bytes: K: packets are marked while the queue exceeds it (DCTCP-style step).
        threshold_us: K as a delay; used instead of ``threshold_bytes`` when > 0.
        max_threshold_bytes: K_max for WRED-style marking: probability rises linearly from 0
            at K to ``max_probability`` at K_max, and everything above K_max is marked;
            0 means K_max = K (step marking).
        max_probability: marking probability at K_max.
        sample_interval_s: period of the queue and marker counter samples.
    """

    marking: str = "required"
    method: str = "auto"
    threshold_bytes: int = 30000
    threshold_us: float = 0.0
    max_threshold_bytes: int = 0
    max_probability: float = 1.0
    sample_interval_s: float = 0.25


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
        jobs: the job mix; all jobs start together, jobs that do not fit wait for a later wave.
        policies: placement policy spec strings, or ``[all]`` for every registered policy.
        iterations: recorded training iterations per job.
        warmup_iterations: iterations run before recording starts.
        mode: worker mode, ``replay`` (model profile buckets, emulated compute) or ``train``
            (real DDP training of a small model).
        runtime: how replay ranks run: ``agent`` (one light process per machine running all of
            its ranks over plain TCP, no torch; :mod:`jobs.agent`) or ``torch`` (one gloo
            process per rank, :mod:`jobs.worker`; gloo's own allreduce runs for real instead
            of its mirrored-ring model). ``train`` mode always runs one torch process per rank.
        mtu: MTU on every emulated interface.
        switch_ports: how switch ports reach the userspace datapath: ``auto`` (AF_XDP where it
            runs, else plain veths), ``afxdp`` (an error where it cannot run) or ``system``;
            see :mod:`testbed.ports`.
        routing: controller routing mode, ``ecmp`` (deterministic, simulator-predictable) or
            ``select`` (OVS per-flow hashing).
        queue_packets: FIFO limit under each shaped link.
        congestion_control: TCP congestion control in the hosts; it must react to ECN
            (cubic, reno, dctcp, ...; not bbr) unless ECN marking is off.
        ecn: ECN marking and host ECN settings.
        stats_interval_s: port statistics polling period.
        job_timeout_s: a wave of jobs that runs longer than this fails; in paper-scale
            (virtual) seconds, so the wall-clock timeout of a wave is ``job_timeout_s * dilation``.
        time_limit_s: wall-clock budget of the whole experiment in seconds; :func:`validate`
            rejects a configuration whose lower-bound wall-time estimate (see
            :func:`wall_time_lower_bound_s`) exceeds it.
        results_dir: where ``<timestamp>-<name>/`` run directories go.
    """

    name: str = "experiment"
    seed: int = 1
    topology: TopologyConfig = dataclasses.field(default_factory=TopologyConfig)
    scale: float = 500.0
    dilation: float = 3.0
    background: dict = dataclasses.field(default_factory=dict)
    jobs: tuple = ()
    policies: tuple = ("all",)
    iterations: int = 10
    warmup_iterations: int = 2
    mode: str = "replay"
    runtime: str = "agent"
    mtu: int = 1500
    switch_ports: str = "auto"
    routing: str = "ecmp"
    queue_packets: int = 100
    congestion_control: str = "cubic"
    ecn: EcnConfig = dataclasses.field(default_factory=EcnConfig)
    stats_interval_s: float = 0.5
    job_timeout_s: float = 300.0
    time_limit_s: float = 3600.0
    results_dir: str = "results"


MODES = ("replay", "train")
RUNTIMES = ("agent", "torch")
ECN_BLIND_CONGESTION_CONTROLS = ("bbr",)  # ignore CE marks (BBRv1)
ROUTING_MODES = ("ecmp", "select")


def _reject_unknown(data: dict, cls, where: str) -> None:
    names = [f.name for f in dataclasses.fields(cls)]
    for key in data:
        if key not in names:
            hint = difflib.get_close_matches(str(key), names, n=1)
            extra = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ConfigError(f"{where}: unknown key {key!r}{extra}; valid keys: {', '.join(names)}")


def _coerce(value, typ, where: str):
    if typ in (int, float, str, bool):
        if typ in (int, float) and isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}: expected a finite number, got {value!r}")
        ok = (isinstance(value, typ) and not (typ is int and isinstance(value, bool))) or (
            typ is float and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise ConfigError(f"{where}: expected {typ.__name__}, got {value!r}")
        return typ(value)
    return value


def _build(cls, data: Any, where: str):
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    _reject_unknown(data, cls, where)
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{where}: missing required key {f.name!r}")
            continue
        kwargs[f.name] = _coerce(data[f.name], hints[f.name], f"{where}.{f.name}")
    return cls(**kwargs)


def from_dict(data: Any) -> ExperimentConfig:
    """Build a configuration from parsed YAML, strictly."""
    if not isinstance(data, dict):
        raise ConfigError("config: the top level must be a mapping of keys to values")
    data = dict(data)
    topo = data.pop("topology", None)
    jobs = data.pop("jobs", None)
    policies = data.pop("policies", None)
    background = data.pop("background", None)
    ecn = data.pop("ecn", None)
    cfg = _build(ExperimentConfig, data, "config")
    changes = {}
    if ecn is not None:
        changes["ecn"] = _build(EcnConfig, ecn, "config.ecn")
    if topo is not None:
        if not isinstance(topo, dict) or "kind" not in topo:
            raise ConfigError("config.topology: expected a mapping with a 'kind' key, e.g. {kind: fat_tree, k: 4}")
        params = {k: v for k, v in topo.items() if k != "kind"}
        changes["topology"] = TopologyConfig(kind=str(topo["kind"]), params=params)
    if jobs is not None:
        if not isinstance(jobs, list) or not jobs:
            raise ConfigError("config.jobs: expected a non-empty list of jobs")
        changes["jobs"] = tuple(_build(JobConfig, j, f"config.jobs[{i}]") for i, j in enumerate(jobs))
    if policies is not None:
        if isinstance(policies, str):
            policies = [policies]
        if not isinstance(policies, list) or not policies or not all(isinstance(p, str) for p in policies):
            raise ConfigError("config.policies: expected a non-empty list of policy spec strings")
        changes["policies"] = tuple(policies)
    if background is not None:
        if not isinstance(background, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in background.values()):
            raise ConfigError("config.background: expected a mapping machine -> number of busy GPUs")
        changes["background"] = {str(k): v for k, v in background.items()}
    return dataclasses.replace(cfg, **changes)


def load(path: str) -> ExperimentConfig:
    """Read and strictly parse a YAML experiment file (not yet validated against the registries)."""
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"config {path} is not valid YAML{where}: {problem}") from None
    return from_dict(data)


def to_dict(cfg: ExperimentConfig) -> dict:
    """The fully resolved configuration, JSON-serialisable and loadable again by :func:`load`.

    A run's ``config.json`` is therefore itself a config file (JSON is YAML) that repeats the run.
    """
    d = dataclasses.asdict(cfg)
    d["topology"] = {"kind": cfg.topology.kind, **cfg.topology.params}
    d["jobs"] = [dataclasses.asdict(j) for j in cfg.jobs]
    d["policies"] = list(cfg.policies)
    d["ecn"] = dataclasses.asdict(cfg.ecn)
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

    Every policy runs each job's warm-up and measured iterations at least once, and the
    emulated compute of one iteration alone takes ``compute_time_s * dilation`` of wall time;
    jobs of one policy may run in parallel, policies one after another. Hence at least::

        len(policy_specs(cfg)) * max over jobs of
            (warmup_iterations + iterations) * compute_time_s * dilation

    Communication, later waves, setup and teardown only add to it. Pure: no I/O.

    Args:
        cfg: the configuration; its models must exist.

    Returns:
        The bound in wall-clock seconds (0 when there are no jobs).

    Raises:
        JobError: when a job names an unknown model.
    """
    _, compute_s = _slowest_compute(cfg)
    return len(policy_specs(cfg)) * (cfg.warmup_iterations + cfg.iterations) * compute_s * cfg.dilation


def _slowest_compute(cfg: ExperimentConfig) -> tuple[str, float]:
    """The model with the longest paper-scale compute time per iteration among the jobs, and that time."""
    from jobs.models import get_model

    return max(((j.model, get_model(j.model).compute_time_s) for j in cfg.jobs), key=lambda t: t[1],
               default=("", 0.0))


def _format_duration(seconds: float) -> str:
    """``8h 20m``, ``12m 5s`` or ``42.5 s``: a wall time for a human."""
    if seconds < 60:
        return f"{seconds:.3g} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        m, s = divmod(round(seconds), 60)
        return f"{m}m {s}s"
    h, m = divmod(minutes, 60)
    return f"{h}h {m}m"


def validate(cfg: ExperimentConfig):
    """Check the configuration against the registries and the machine-independent limits.

    Returns:
        The topology graph the configuration describes.

    Raises:
        ConfigError: naming the offending value and the valid choices.
    """
    from jobs.models import get_model
    from jobs.patterns import COLLECTIVE_NAMES
    from placement import make_policy
    from placement.base import Cluster
    from testbed.net import link_rates_mbps
    from testbed.ports import PORT_TYPES
    from topo import build_topology

    for key, value, lo in (("scale", cfg.scale, 0), ("iterations", cfg.iterations, 1),
                           ("mtu", cfg.mtu, 576), ("queue_packets", cfg.queue_packets, 1),
                           ("job_timeout_s", cfg.job_timeout_s, 1), ("stats_interval_s", cfg.stats_interval_s, 0.05),
                           ("time_limit_s", cfg.time_limit_s, 0)):
        if not (value > lo if lo == 0 else value >= lo):  # written so that NaN fails too
            raise ConfigError(f"config.{key}: {value:g} is out of range (must be {'>' if lo == 0 else '>='} {lo})")
    if not cfg.dilation >= 1:
        raise ConfigError(f"config.dilation: {cfg.dilation:g} must be >= 1 (1 = no dilation)")
    if cfg.warmup_iterations < 0:
        raise ConfigError(f"config.warmup_iterations: {cfg.warmup_iterations} must be >= 0")
    if cfg.mode not in MODES:
        raise ConfigError(f"config.mode: unknown mode {cfg.mode!r}; valid: {', '.join(MODES)}")
    if cfg.runtime not in RUNTIMES:
        raise ConfigError(f"config.runtime: unknown runtime {cfg.runtime!r}; valid: {', '.join(RUNTIMES)}")
    if cfg.switch_ports not in PORT_TYPES:
        raise ConfigError(f"config.switch_ports: unknown port type {cfg.switch_ports!r}; valid: "
                          f"{', '.join(PORT_TYPES)}")
    if cfg.routing not in ROUTING_MODES:
        raise ConfigError(f"config.routing: unknown routing {cfg.routing!r}; valid: {', '.join(ROUTING_MODES)}")
    if not cfg.jobs:
        raise ConfigError("config.jobs: an experiment needs at least one job")
    _validate_ecn(cfg)
    try:
        g = build_topology(cfg.topology.kind, **cfg.topology.params)
        link_rates_mbps(g, cfg.scale, cfg.dilation)
        cluster = Cluster.from_topology(g)
        cluster.set_background(cfg.background)
    except TestbedError as e:
        raise ConfigError(f"config.topology: {e}") from None
    free = cluster.view().total_free
    names = set()
    for j in cfg.jobs:
        if j.name in names:
            raise ConfigError(f"config.jobs: duplicate job name {j.name!r}")
        names.add(j.name)
        if j.workers < 1:
            raise ConfigError(f"config.jobs: job {j.name!r} has {j.workers} workers; must be >= 1")
        if j.workers > free:
            raise ConfigError(f"config.jobs: job {j.name!r} needs {j.workers} GPUs but the cluster has only "
                              f"{free} free (after background load); it can never be placed")
        try:
            get_model(j.model)
        except TestbedError as e:
            raise ConfigError(f"config.jobs: job {j.name!r}: {e}") from None
        if j.collective not in COLLECTIVE_NAMES:
            raise ConfigError(f"config.jobs: job {j.name!r}: unknown collective {j.collective!r}; "
                              f"valid: {', '.join(sorted(COLLECTIVE_NAMES))}")
        if cfg.mode == "train" and j.model != "small_cnn":
            raise ConfigError(f"config.jobs: job {j.name!r}: mode 'train' trains only model 'small_cnn', "
                              f"not {j.model!r}; use mode 'replay' for profiled models")
    for spec in policy_specs(cfg):
        try:
            make_policy(spec, seed=cfg.seed)
        except TestbedError as e:
            raise ConfigError(f"config.policies: {e}") from None
    _validate_time_limit(cfg)
    return g


def _validate_time_limit(cfg: ExperimentConfig) -> None:
    """Reject a configuration whose wall-time lower bound exceeds ``time_limit_s``, naming the fix."""
    bound_s = wall_time_lower_bound_s(cfg)
    if bound_s <= cfg.time_limit_s:
        return
    model, compute_s = _slowest_compute(cfg)
    n_policies = len(policy_specs(cfg))
    terms = (f"{n_policies} {'policy' if n_policies == 1 else 'policies'} x "
             f"{cfg.warmup_iterations + cfg.iterations} iterations x {compute_s:g} s compute ({model}) x "
             f"{cfg.dilation:g}")
    in_s = f" ({bound_s:.0f} s)" if bound_s >= 60 else ""
    takes = f"at least {_format_duration(bound_s)}{in_s} of wall time ({terms})"
    limit = f"above time_limit_s {cfg.time_limit_s:g} s"
    if cfg.dilation > 1:
        raise ConfigError(f"config.dilation: {cfg.dilation:g} makes the experiment take {takes}, {limit}; "
                          f"lower dilation or raise time_limit_s")
    raise ConfigError(f"config.time_limit_s: the experiment takes {takes}, {limit}; raise time_limit_s "
                      f"or run fewer iterations or policies")


def _validate_ecn(cfg: ExperimentConfig) -> None:
    from testbed.ecn import MARKING, METHODS

    e = cfg.ecn
    if e.marking not in MARKING:
        raise ConfigError(f"config.ecn.marking: unknown value {e.marking!r}; valid: {', '.join(MARKING)}")
    if e.method not in METHODS:
        raise ConfigError(f"config.ecn.method: unknown method {e.method!r}; valid: {', '.join(METHODS)}")
    if e.threshold_bytes < 0 or e.threshold_us < 0 or e.max_threshold_bytes < 0:
        raise ConfigError("config.ecn: thresholds must be >= 0")
    if e.max_threshold_bytes and e.max_threshold_bytes < e.threshold_bytes:
        raise ConfigError(f"config.ecn.max_threshold_bytes: {e.max_threshold_bytes} is below threshold_bytes "
                          f"{e.threshold_bytes}")
    if not 0 < e.max_probability <= 1:
        raise ConfigError(f"config.ecn.max_probability: {e.max_probability} must be in (0, 1]")
    if e.sample_interval_s < 0.05:
        raise ConfigError(f"config.ecn.sample_interval_s: {e.sample_interval_s} must be >= 0.05")
    if e.marking != "off" and cfg.congestion_control in ECN_BLIND_CONGESTION_CONTROLS:
        raise ConfigError(f"config.congestion_control: {cfg.congestion_control!r} ignores ECN marks; use one "
                          f"that reacts to them (cubic, reno, dctcp) or set ecn.marking: off")
