"""``experiment.json``: what a run ran, described for any simulator to replay.

Built from the run directory alone (``config.json``, ``topology.json``, ``summary.json`` and, per
policy, ``placements.json``, ``measurements.json`` and rank 0's iteration records): the fabric,
routes, placements, jobs and traffic the testbed measured, which a simulator's estimates are then
compared with (:mod:`experiment.validate.estimates`). A pure core (:func:`build_experiment`) and a
thin I/O shell (:func:`read_run`, :func:`export_run`, :func:`write_export`). The schema, its units
and how arrival times are derived: ``docs/results.md`` (*experiment.json*).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import networkx as nx

from common.errors import TestbedError
from common.files import UnreadableFile, read_regular_file
from common.jsonfile import write_json_atomic
from common.specs import safe_name
from common.units import scale_bw_mbps, virtual_s
from experiment.config.schema import ExperimentConfig, load
from ina.plan import ps_host_of
from jobs.collective import collective_of
from jobs.models import job_model
from jobs.modes import work_mode
from jobs.patterns import barrier_bytes, replay_pattern
from jobs.records import IterationRecord
from topo.io import read_topology_json
from topo.routing import EcmpRoutes, equal_cost_paths
from topo.schema import SIMULATOR_LIMITS, natural_key

FORMAT = "experiment"
FORMAT_VERSION = 1
EXPORT_FILE = "experiment.json"
MAX_RESULT_BYTES = 256 << 20
"""Largest results file read (``measurements.json`` of a big fabric holds per-link counters)."""
MAX_RECORD_LINE_BYTES = 1 << 20


class ResultsError(TestbedError):
    """A results directory that lacks a file, or holds one that is unreadable or malformed."""


# --- records --------------------------------------------------------------------------------


def _jsonable(value):
    """Records as dicts, tuples as lists and non-finite floats as None (unknown), recursively, so that
    the result equals its own JSON round trip."""
    if isinstance(value, _Record):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class _Record:
    """A frozen dataclass whose JSON form is its fields, recursively."""

    def to_dict(self) -> dict:
        """JSON-serialisable form (the schema in ``docs/results.md``)."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclasses.dataclass(frozen=True)
class Node(_Record):
    """A node of the fabric (``topology.nodes``)."""

    name: str
    role: str
    gpus: int | None
    rack: str | None
    tier: str | None
    pod: str | None


@dataclasses.dataclass(frozen=True)
class Link(_Record):
    """One direction of a link (``topology.links``); rates in Mbit/s."""

    src: str
    dst: str
    rate_mbps: float
    emulated_rate_mbps: float
    shaped_rate_mbps: float
    delay_us: float


@dataclasses.dataclass(frozen=True)
class Route(_Record):
    """The path of the flows from machine ``src`` to machine ``dst`` (``routing.routes``)."""

    src: str
    dst: str
    path: tuple[str, ...]
    equal_cost_paths: tuple[tuple[str, ...], ...] | None = None

    def to_dict(self) -> dict:
        """JSON form; ``equal_cost_paths`` only where it is set (routing mode ``select``)."""
        d = super().to_dict()
        if self.equal_cost_paths is None:
            del d["equal_cost_paths"]
        return d


@dataclasses.dataclass(frozen=True)
class Rank(_Record):
    """Where one rank of a job ran."""

    rank: int
    machine: str
    gpu: int


@dataclasses.dataclass(frozen=True)
class Measured(_Record):
    """A job's measured figures (paper-scale seconds), for reference; None: not measured."""

    comm_mean_s: float | None
    comm_p99_s: float | None
    compute_mean_s: float | None
    iteration_mean_s: float | None
    iterations_recorded: int | None
    complete: bool | None


@dataclasses.dataclass(frozen=True)
class Wave(_Record):
    """One wave of a policy's run: jobs that started together."""

    index: int
    jobs: tuple[str, ...]
    starts_after_wave: int | None
    arrival_s: float | None
    measured_run_s: float | None
    measured_startup_s: float | None


@dataclasses.dataclass(frozen=True)
class Job(_Record):
    """One job as a policy placed and the testbed ran it (``policies[].jobs``)."""

    name: str
    model: str
    collective: str
    workers: int
    wave: int
    arrival_s: float | None
    starts_after_wave: int | None
    submitted_s: float
    ranks: tuple[Rank, ...]
    ps_host: str | None
    ina_switches: tuple[str, ...] | None
    machine_pairs: tuple[tuple[str, str], ...]
    bucket_bytes: tuple[int, ...]
    emulated_bucket_bytes: tuple[int, ...]
    bucket_source: str
    bytes_per_iteration: int
    emulated_bytes_per_iteration: int
    compute_s: float
    iterations: int
    warmup_iterations: int
    measured: Measured


@dataclasses.dataclass(frozen=True)
class ExportedPolicy(_Record):
    """What one policy ran (``policies[]``)."""

    policy: str
    dir: str
    waves: tuple[Wave, ...]
    jobs: tuple[Job, ...]


@dataclasses.dataclass(frozen=True)
class Experiment:
    """The whole export; :meth:`to_dict` is ``experiment.json``."""

    run: dict
    scale: float
    dilation: float
    topology_name: str
    topology_kind: str
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    routing_mode: str
    routes: tuple[Route, ...]
    policies: tuple[ExportedPolicy, ...]
    unplaced: dict

    def to_dict(self) -> dict:
        """The JSON form, the schema in ``docs/results.md``."""
        return _jsonable({
            "format": FORMAT, "format_version": FORMAT_VERSION, "run": dict(self.run),
            "scale": self.scale, "dilation": self.dilation,
            "topology": {"name": self.topology_name, "kind": self.topology_kind, "nodes": self.nodes,
                         "links": self.links},
            "routing": {"mode": self.routing_mode, "function": "topo.routing.ecmp_path",
                        "exact": self.routing_mode == "ecmp", "routes": self.routes},
            "policies": self.policies,
            "unplaced": dict(self.unplaced)})


@dataclasses.dataclass(frozen=True)
class PolicyFiles:
    """What the export reads of one policy's directory.

    Attributes:
        placements: ``placements.json`` (``wave``, ``job``, ``slots`` in rank order, ``ps_host``,
            ``ina_switches``).
        waves: the ``waves`` entries of ``measurements.json`` (None: no such file).
        recorded_buckets: job -> emulated bucket sizes of rank 0's first recorded iteration
            (jobs without a record are absent).
    """

    placements: tuple[dict, ...]
    waves: tuple[dict, ...] | None
    recorded_buckets: dict


# --- pure core ------------------------------------------------------------------------------


def topology_records(g: nx.Graph, scale: float, dilation: float) -> tuple[tuple[Node, ...], tuple[Link, ...]]:
    """The nodes and both directions of every link of ``g``, in the graph's order."""
    nodes = tuple(Node(name=n, role=d["role"], gpus=d.get("gpus") if d["role"] == "machine" else None,
                       rack=d.get("rack") if d["role"] == "machine" else None,
                       tier=d.get("tier") if d["role"] == "switch" else None, pod=d.get("pod"))
                  for n, d in g.nodes(data=True))
    links = []
    for u, v, d in g.edges(data=True):
        rate = float(d["bw_mbps"])
        for src, dst in ((u, v), (v, u)):
            links.append(Link(src, dst, rate, scale_bw_mbps(rate, scale), scale_bw_mbps(rate, scale * dilation),
                              float(d.get("delay_us", 0.0))))
    return nodes, tuple(links)


def machine_pairs(collective: str, machines_by_rank: tuple[str, ...], sizes) -> tuple[tuple[str, str], ...]:
    """Directed machine pairs over which the replay of ``collective`` sends data in any of ``sizes``
    (bytes), sorted by natural name order. Ranks on one machine exchange in memory: no pair."""
    out = set()
    for size in set(sizes):
        for step in replay_pattern(collective, len(machines_by_rank), size):
            for s, d, b in step:
                if b and machines_by_rank[s] != machines_by_rank[d]:
                    out.add((machines_by_rank[s], machines_by_rank[d]))
    return tuple(sorted(out, key=lambda p: (natural_key(p[0]), natural_key(p[1]))))


def routes_for(g: nx.Graph, pairs, mode: str) -> tuple[Route, ...]:
    """The route of every pair in ``pairs``: :func:`topo.routing.ecmp_path`, plus every equal-cost
    path when ``mode`` is ``select`` (OVS then hashes each flow onto one of them)."""
    ordered = sorted(set(pairs), key=lambda p: (natural_key(p[0]), natural_key(p[1])))
    routes = EcmpRoutes(g)  # one BFS per destination: ecmp_path's paths
    return tuple(Route(s, d, routes.path(s, d), equal_cost_paths(g, s, d) if mode == "select" else None)
                 for s, d in ordered)


def wave_records(placements, waves: tuple[dict, ...] | None, dilation: float) -> tuple[Wave, ...]:
    """The waves of a policy's run with their arrival times (``docs/results.md``, *Arrival times*)."""
    jobs_by_wave: dict[int, list[str]] = {}
    for p in placements:
        jobs_by_wave.setdefault(p["wave"], []).append(p["job"])
    timing = {}
    for w in waves or ():
        duration, startup = w.get("duration_s"), w.get("startup_s")
        if _finite(duration):
            run_s = virtual_s(duration - (startup if _finite(startup) else 0.0), dilation)
            timing[w.get("index")] = (run_s, virtual_s(startup, dilation) if _finite(startup) else None)
    out: list[Wave] = []
    arrival: float | None = 0.0
    for index in sorted(jobs_by_wave):
        run_s, startup_s = timing.get(index, (None, None))
        out.append(Wave(index, tuple(jobs_by_wave[index]), index - 1 if index > 0 else None, arrival, run_s,
                        startup_s))
        arrival = arrival + run_s if arrival is not None and run_s is not None else None
    return tuple(out)


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def job_record(cfg: ExperimentConfig, placement: dict, wave: Wave, summary_job: dict | None,
               recorded: tuple[int, ...] | None, specs: dict | None = None) -> Job:
    """One placed job: its ranks, traffic, compute and the run's measurement of it. ``specs``: the
    run's jobs by name (:func:`experiment.config.workload.experiment_jobs`; default: the config's ``jobs``)."""
    from experiment.config.workload import experiment_jobs

    name = placement["job"]
    specs = specs if specs is not None else {j.name: j for j in experiment_jobs(cfg)}
    spec = specs.get(name)
    if spec is None:
        raise ResultsError(f"placed job {name!r} is not in config.json; jobs: {', '.join(list(specs)[:10])}")
    profile = job_model(spec.model, spec.compute_ms)
    if recorded:
        emulated, source = tuple(int(b) for b in recorded), "records"
    else:
        emulated = work_mode(cfg.mode).buckets(profile, cfg.scale)
        source = "model"
    ranks = tuple(Rank(r, m, int(gpu)) for r, (m, gpu) in enumerate(placement["slots"]))
    machines_by_rank = tuple(r.machine for r in ranks)
    if collective_of(spec.collective).aggregates_in_fabric:  # every machine and its PS, both ways
        ps = ps_host_of(placement.get("ps_host"), machines_by_rank)
        pairs = tuple(sorted({p for m in machines_by_rank if m != ps for p in ((m, ps), (ps, m))},
                             key=lambda p: (natural_key(p[0]), natural_key(p[1]))))
    else:
        pairs = machine_pairs(spec.collective, machines_by_rank, (*emulated, barrier_bytes(len(ranks))))
    s = summary_job or {}
    comm, compute = s.get("comm_mean_s"), s.get("compute_mean_s")
    measured = Measured(comm_mean_s=comm, comm_p99_s=s.get("comm_p99_s"), compute_mean_s=compute,
                        iteration_mean_s=comm + compute if _finite(comm) and _finite(compute) else None,
                        iterations_recorded=s.get("iterations_recorded"), complete=s.get("complete"))
    paper = tuple(int(round(b * cfg.scale)) for b in emulated)
    return Job(name=name, model=spec.model, collective=spec.collective, workers=spec.workers, wave=wave.index,
               arrival_s=wave.arrival_s, starts_after_wave=wave.starts_after_wave, submitted_s=spec.arrival_s,
               ranks=ranks,
               ps_host=placement.get("ps_host"), ina_switches=(tuple(placement["ina_switches"])
                                                                if placement.get("ina_switches") is not None else None),
               machine_pairs=pairs, bucket_bytes=paper, emulated_bucket_bytes=emulated, bucket_source=source,
               bytes_per_iteration=sum(paper), emulated_bytes_per_iteration=sum(emulated),
               compute_s=profile.compute_time_s, iterations=spec.iterations,
               warmup_iterations=cfg.warmup_iterations, measured=measured)


def build_experiment(cfg: ExperimentConfig, g: nx.Graph, summary: dict, files: dict[str, PolicyFiles],
                     run_dir_name: str = "") -> Experiment:
    """The export of a run from its parsed files (pure).

    Args:
        cfg: the run's resolved configuration (``config.json``).
        g: its topology (``topology.json``).
        summary: ``summary.json``; its ``policies`` say which policies ran, in order.
        files: policy spec -> what its directory holds.
        run_dir_name: the run directory's name, for ``run.dir``.

    Raises:
        ResultsError: a policy of the summary has no files, or a placement is malformed.
    """
    from experiment.config.workload import experiment_jobs

    nodes, links = topology_records(g, cfg.scale, cfg.dilation)
    specs = {j.name: j for j in experiment_jobs(cfg, g)}
    policies, pairs = [], set()
    for s in summary.get("policies") or []:
        spec = s["policy"]
        if spec not in files:
            raise ResultsError(f"policy {spec!r} is in summary.json but its directory {safe_name(spec)}/ was not read")
        pf = files[spec]
        try:
            waves = wave_records(pf.placements, pf.waves, cfg.dilation)
            by_index = {w.index: w for w in waves}
            jobs = tuple(job_record(cfg, p, by_index[p["wave"]], (s.get("jobs") or {}).get(p["job"]),
                                    pf.recorded_buckets.get(p["job"]), specs) for p in pf.placements)
        except (KeyError, TypeError, ValueError) as exc:
            raise ResultsError(f"{safe_name(spec)}/placements.json: malformed placement ({type(exc).__name__}: "
                               f"{str(exc)[:160]})") from None
        for j in jobs:
            pairs.update(j.machine_pairs)
        policies.append(ExportedPolicy(spec, safe_name(spec), waves, jobs))
    run = {"name": cfg.name, "dir": run_dir_name, "mode": cfg.mode, "runtime": cfg.runtime, "mtu": cfg.mtu,
           "seed": cfg.seed, "scheduler": cfg.scheduler}
    return Experiment(run=run, scale=cfg.scale, dilation=cfg.dilation, topology_name=g.graph.get("name", ""),
                      topology_kind=g.graph.get("kind", ""), nodes=nodes, links=links, routing_mode=cfg.routing,
                      routes=routes_for(g, pairs, cfg.routing), policies=tuple(policies),
                      unplaced=dict(summary.get("unplaced") or {}))


# --- I/O shell ------------------------------------------------------------------------------


def read_run_json(path: str, what: str, required: bool = True):
    """A results file as parsed JSON: a regular UTF-8 file of at most :data:`MAX_RESULT_BYTES`.

    Returns None for a missing file when not ``required``.

    Raises:
        ResultsError: the file is missing (and required), not a regular file, too large, not UTF-8
            or not JSON; one line naming the path.
    """
    try:
        data = read_regular_file(path, MAX_RESULT_BYTES)
    except UnreadableFile as exc:
        if exc.missing and not required:
            return None
        if exc.missing:
            raise ResultsError(f"{what} {path} does not exist; is this a run directory (results/<time>-<name>/)?") \
                from None
        raise ResultsError(f"cannot read {what} {path}: {exc}") from None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ResultsError(f"cannot read {what} {path}: not UTF-8 JSON ({type(exc).__name__}: "
                           f"{str(exc)[:160]})") from None


def first_recorded_buckets(path: str) -> tuple[int, ...] | None:
    """Bucket sizes of the first record in a rank's records file (None: no file or no record).

    Only the first line is read (the records of one rank repeat the same buckets).

    Raises:
        ResultsError: the first line is not an iteration record.
    """
    try:
        with open(path, encoding="utf-8") as f:
            line = f.readline(MAX_RECORD_LINE_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(f"cannot read iteration records {path}: {exc}") from None
    if not line.strip():
        return None
    try:
        return tuple(IterationRecord.from_dict(json.loads(line)).bucket_bytes) or None
    except (ValueError, TestbedError) as exc:
        raise ResultsError(f"{path}:1: not an iteration record: {str(exc)[:160]}") from None


def read_policy_files(pdir: str) -> PolicyFiles:
    """What :func:`build_experiment` needs of one policy directory."""
    placements = read_run_json(os.path.join(pdir, "placements.json"), "placements")
    if not isinstance(placements, list) or not all(isinstance(p, dict) and "job" in p for p in placements):
        raise ResultsError(f"{pdir}/placements.json: expected a list of placements with a 'job' each")
    measurements = read_run_json(os.path.join(pdir, "measurements.json"), "measurements", required=False)
    waves = measurements.get("waves") if isinstance(measurements, dict) else None
    waves = tuple(w for w in waves if isinstance(w, dict)) if isinstance(waves, list) else None
    recorded = {}
    for p in placements:
        # Rank 0's records file, named as workers.launcher.file_stem names it.
        b = first_recorded_buckets(os.path.join(pdir, "jobs", p["job"], f"{p['job']}-rank0.jsonl"))
        if b:
            recorded[p["job"]] = b
    return PolicyFiles(tuple(placements), waves, recorded)


def read_run(run_dir: str) -> tuple[ExperimentConfig, nx.Graph, dict, dict[str, PolicyFiles]]:
    """The configuration, topology, summary and policy files of a run directory.

    Raises:
        ResultsError: a file is missing or malformed.
        ConfigError, TopologyError: ``config.json`` or ``topology.json`` does not parse.
    """
    cfg_path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(cfg_path):
        raise ResultsError(f"{cfg_path} does not exist; is {run_dir} a run directory (results/<time>-<name>/)?")
    cfg = load(cfg_path)
    # Either back end's run: its topology within the larger limits, the simulator's.
    g = read_topology_json(os.path.join(run_dir, "topology.json"), SIMULATOR_LIMITS)
    summary = read_run_json(os.path.join(run_dir, "summary.json"), "run summary")
    if not isinstance(summary, dict) or not isinstance(summary.get("policies", []), list):
        raise ResultsError(f"{run_dir}/summary.json: expected an object with a 'policies' list")
    files = {}
    for s in summary.get("policies") or []:
        if not isinstance(s, dict) or not isinstance(s.get("policy"), str):
            raise ResultsError(f"{run_dir}/summary.json: a policy summary without a 'policy' name")
        files[s["policy"]] = read_policy_files(os.path.join(run_dir, safe_name(s["policy"])))
    return cfg, g, summary, files


def export_run(run_dir: str) -> dict:
    """The ``experiment.json`` content of the run in ``run_dir`` (the schema in ``docs/results.md``)."""
    cfg, g, summary, files = read_run(run_dir)
    return build_experiment(cfg, g, summary, files, os.path.basename(os.path.normpath(run_dir))).to_dict()


def write_export(run_dir: str) -> str:
    """Write :func:`export_run` of ``run_dir`` to ``<run_dir>/experiment.json`` (atomically); return its path."""
    path = os.path.join(run_dir, EXPORT_FILE)
    write_json_atomic(path, export_run(run_dir), allow_nan=False, indent=1, sort_keys=True)
    return path
