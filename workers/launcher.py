"""Plan, launch and wait for the workers of a job (process runtime; no Mininet, no torch).

Three steps, each usable on its own: :func:`plan_workers` (pure) gives each rank's
:class:`WorkerSpec`, :func:`launch` writes the spec files and starts ``python -m workers.worker SPEC``
through the caller's ``exec_fn`` (the testbed's runs it in the machine's Mininet host,
:func:`local_exec` as a local subprocess), and :func:`wait_all` waits with a timeout, killing by PID
what ``launch`` started and raising :class:`JobError` when a rank fails.

An example, the files each rank writes: ``docs/fidelity.md`` (Launching torch workers).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from common.errors import JobError
from common.paths import PROJECT_ROOT
from common.units import wall_s
from ina.protocol import VALUES_PER_PACKET
from jobs.collective import JOB_COLLECTIVES
from jobs.models import ModelProfile
from jobs.modes import work_mode


class JobLike(Protocol):
    """What :func:`plan_workers` reads of a job (``placement.base.JobRequest`` has it): ``jobs``
    does not import ``placement``, so the worker side starts without it (and networkx)."""

    name: str
    model: str
    workers: int
    collective: str


class SlotLike(Protocol):
    """A GPU slot: the machine it is on."""

    machine: str


class PlacementLike(Protocol):
    """What :func:`plan_workers` reads of a placement (``placement.base.Placement`` has it)."""

    job: str
    slots: Sequence[SlotLike]

LOG_TAIL_LINES = 15

ExecFn = Callable[[str, list, dict, str], subprocess.Popen]
"""``exec_fn(machine, argv, env, log_path) -> Popen``: start ``argv`` with environment ``env``
on ``machine``, stdout and stderr to ``log_path``."""


def write_json_file(path: str | Path, data: Mapping) -> None:
    """Write ``data`` as indented JSON (the files the launcher hands to worker processes)."""
    Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def read_json_file(path: str | Path, what: str) -> dict:
    """Read a JSON file written by :func:`write_json_file`; :class:`JobError` names ``what`` and why not."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise JobError(f"cannot read {what} {path}: {exc}") from None


@dataclasses.dataclass(frozen=True)
class InaEndpoint:
    """One machine's INA endpoint for one job (:mod:`ina.plan`'s bit and the PS's address).

    Attributes:
        job_id: the job's INA id.
        bit: this machine's bit in the job's aggregation tree.
        ps_addr: IP address of the job's parameter server.
        addr: the machine's address, the client's to bind (``0.0.0.0``: any of the machine's).
        values_per_packet: int32 lanes per packet (:class:`ina.client.InaClient`).
    """

    job_id: int
    bit: int
    ps_addr: str
    addr: str = "0.0.0.0"
    values_per_packet: int = VALUES_PER_PACKET

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return {"job_id": self.job_id, "bit": self.bit, "ps_addr": self.ps_addr, "addr": self.addr,
                "values_per_packet": self.values_per_packet}

    @classmethod
    def from_dict(cls, d: Mapping) -> "InaEndpoint":
        """Inverse of :meth:`to_dict`."""
        return cls(int(d["job_id"]), int(d["bit"]), str(d["ps_addr"]), str(d.get("addr", "0.0.0.0")),
                   int(d.get("values_per_packet", VALUES_PER_PACKET)))


def ina_counters_path(out_dir: str | Path, machine: str) -> str:
    """Where the INA client of ``machine`` writes each INA job's client counters
    (:class:`ina.client.ClientStats` by job name, JSON), in a job's output directory."""
    return str(Path(out_dir) / f"ina-{machine}.json")


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """Everything one worker process needs; JSON-serialisable (``to_dict`` / ``save``).

    Attributes:
        job: job name.
        rank: this worker's rank (0-based).
        world: number of workers.
        machine: machine (emulated host) the rank runs on.
        master_addr: IP address of rank 0's machine (the gloo rendezvous store).
        master_port: TCP port of the rendezvous store.
        ifname: network interface gloo binds to (``GLOO_SOCKET_IFNAME``), or None for gloo's choice.
        mode: ``"replay"`` (emulated compute, replayed buckets) or ``"train"`` (real DDP training).
        model: model profile name (see :mod:`jobs.models`).
        bucket_bytes: bucket sizes allreduced per iteration in replay mode (already scaled);
            informational in train mode, where DDP forms the buckets.
        compute_s: emulated compute time per iteration in replay mode.
        iterations: recorded iterations.
        warmup_iterations: iterations run before them and not recorded.
        collective: allreduce algorithm name (see :mod:`workers.collectives`).
        records_path: JSON-lines file this rank writes its records to.
        timeout_s: gloo timeout for rendezvous and each collective operation.
        seed: seed of the model initialisation and synthetic data (train mode).
        start_gate: if set, a file path: after joining the process group the worker creates
            ``records_path + ".ready"`` and waits (up to ``timeout_s``) until this file exists
            before its first iteration, so that every job of a wave starts its iterations
            together, after every worker's start-up (see :func:`ready_path`).
        rank_machines: the machine of every rank, in rank order (the collective ``ina`` sums a
            machine's ranks in memory first).
        ina: for collective ``ina``, this rank's machine's endpoint (:func:`with_ina`).
        shift_path: the job's time-shift file, followed before every iteration (None: never shifted;
            :class:`jobs.phase.ShiftFollower`).
    """

    job: str
    rank: int
    world: int
    machine: str
    master_addr: str
    master_port: int
    ifname: str | None
    mode: str
    model: str
    bucket_bytes: tuple[int, ...]
    compute_s: float
    iterations: int
    warmup_iterations: int
    collective: str
    records_path: str
    timeout_s: float = 300.0
    seed: int = 0
    start_gate: str | None = None
    rank_machines: tuple[str, ...] = ()
    ina: InaEndpoint | None = None
    shift_path: str | None = None

    def __post_init__(self):
        where = f"job {self.job!r} rank {self.rank}"
        if not 0 <= self.rank < self.world:
            raise JobError(f"{where}: rank must be in [0, {self.world}), world is {self.world}")
        work_mode(self.mode)
        if self.iterations < 1 or self.warmup_iterations < 0:
            raise JobError(f"{where}: need iterations >= 1 and warmup_iterations >= 0, "
                           f"got {self.iterations} and {self.warmup_iterations}")
        if any(b <= 0 or b % 4 for b in self.bucket_bytes):
            raise JobError(f"{where}: bucket sizes must be positive multiples of 4 bytes, "
                           f"got {self.bucket_bytes}")
        if self.compute_s < 0 or self.timeout_s <= 0:
            raise JobError(f"{where}: need compute_s >= 0 and timeout_s > 0, "
                           f"got {self.compute_s} and {self.timeout_s}")
        if not 0 < self.master_port < 65536:
            raise JobError(f"{where}: bad master_port {self.master_port}")

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        d = dataclasses.asdict(self)
        d["bucket_bytes"] = list(self.bucket_bytes)
        d["rank_machines"] = list(self.rank_machines)
        d["ina"] = self.ina.to_dict() if self.ina is not None else None
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "WorkerSpec":
        """Inverse of :meth:`to_dict`; unknown or missing keys raise :class:`JobError`."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise JobError(f"worker spec has unknown keys {sorted(unknown)}; valid: {sorted(names)}")
        try:
            ina = d.get("ina")
            spec = cls(**{**d, "bucket_bytes": tuple(d.get("bucket_bytes", ())),
                          "rank_machines": tuple(d.get("rank_machines", ())),
                          "ina": InaEndpoint.from_dict(ina) if ina is not None else None})
        except (TypeError, KeyError, ValueError) as exc:
            raise JobError(f"bad worker spec: {exc}") from None
        return spec

    def save(self, path: str | Path) -> None:
        """Write the spec as JSON."""
        write_json_file(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "WorkerSpec":
        """Read a spec written by :meth:`save`."""
        return cls.from_dict(read_json_file(path, "worker spec"))


def with_ina(specs: Sequence[WorkerSpec], endpoints: Mapping[str, InaEndpoint]) -> list[WorkerSpec]:
    """The specs of an INA job's ranks, each with its machine's endpoint (:func:`emulator.ina_fabric.endpoints`).

    Raises:
        JobError: a rank's machine has no endpoint.
    """
    missing = sorted({s.machine for s in specs} - set(endpoints))
    if missing:
        raise JobError(f"INA job {specs[0].job!r} has no INA endpoint on {', '.join(missing)}")
    return [dataclasses.replace(s, ina=endpoints[s.machine]) for s in specs]


@dataclasses.dataclass
class RunningWorker:
    """A started worker: its spec, its process and its files."""

    spec: WorkerSpec
    process: subprocess.Popen
    spec_path: str
    log_path: str


def file_stem(job: str, rank: int) -> str:
    """Base name of a rank's files in the output directory."""
    return f"{job}-rank{rank}"


@dataclasses.dataclass(frozen=True)
class RankSettings:
    """How every rank of a run runs, whatever its job.

    Attributes:
        scale: time-preserving scale factor; replay buckets are ``scaled_buckets(profile, scale)``.
            Train mode sends the real model's gradients, unscaled.
        iterations: recorded iterations.
        warmup_iterations: unrecorded iterations before them.
        mode: ``"replay"`` or ``"train"`` (train needs a profile in ``TRAINABLE_MODELS``).
        out_dir: directory of the records files.
        timeout_s: gloo timeout of each worker (wall-clock: the caller's to dilate).
        seed: model/data seed for train mode.
        start_gate: file the workers wait for before their first iteration (see WorkerSpec).
        dilation: time dilation factor D: the emulated compute time is the profile's times D.
        shift_path: the job's time-shift file its workers follow (:class:`jobs.phase.ShiftFollower`),
            None: never shifted.
    """

    scale: float
    iterations: int
    warmup_iterations: int
    mode: str
    out_dir: str | Path
    timeout_s: float = 300.0
    seed: int = 0
    start_gate: str | None = None
    dilation: float = 1.0
    shift_path: str | None = None


@dataclasses.dataclass(frozen=True)
class Addresses:
    """Where ranks find each other: each machine's IP address, and its interface for gloo (a
    machine missing from ``ifname`` gets None)."""

    ip: Mapping[str, str]
    ifname: Mapping[str, str] = dataclasses.field(default_factory=dict)


def plan_workers(job: JobLike, placement: PlacementLike, profile: ModelProfile, run: RankSettings,
                 addresses: Addresses, master_port: int) -> list[WorkerSpec]:
    """One :class:`WorkerSpec` per rank of ``job`` placed by ``placement``.

    Rank ``r`` runs on ``placement.slots[r].machine``; rank 0's machine hosts the rendezvous
    (``master_addr``, on ``master_port``). Several ranks on one machine share its address and
    interface.

    Args:
        job: the job (its ``collective`` is used).
        placement: where it runs, one slot per worker in rank order.
        profile: the job's model profile.
        run: how every rank runs (iterations, mode, scale, dilation, files).
        addresses: the machines' addresses and interfaces.
        master_port: rendezvous TCP port on rank 0's machine.

    Raises:
        JobError: inconsistent job/placement/profile, unknown collective or mode, a model that
            cannot be trained, a machine without an IP address.
    """
    machine_ip, machine_ifname, mode = addresses.ip, addresses.ifname, work_mode(run.mode)
    if placement.job != job.name:
        raise JobError(f"placement is for job {placement.job!r}, not {job.name!r}")
    if len(placement.slots) != job.workers:
        raise JobError(f"job {job.name!r}: {job.workers} workers but {len(placement.slots)} slots placed")
    if profile.name != job.model:
        raise JobError(f"job {job.name!r}: model is {job.model!r} but the profile given is {profile.name!r}")
    if job.collective not in JOB_COLLECTIVES:
        raise JobError(f"job {job.name!r}: unknown collective {job.collective!r}; "
                       f"valid: {', '.join(sorted(JOB_COLLECTIVES))}")
    mode.check_model(profile.name, f"job {job.name!r}")
    missing = sorted({s.machine for s in placement.slots} - set(machine_ip))
    if missing:
        raise JobError(f"job {job.name!r}: no IP address for machines {missing}")
    buckets = mode.buckets(profile, run.scale)
    master = placement.slots[0].machine
    out_dir = Path(run.out_dir)
    return [
        WorkerSpec(
            job=job.name, rank=r, world=job.workers, machine=slot.machine,
            master_addr=machine_ip[master], master_port=master_port,
            ifname=machine_ifname.get(slot.machine), mode=mode.name, model=profile.name,
            bucket_bytes=tuple(buckets), compute_s=wall_s(profile.compute_time_s, run.dilation),
            iterations=run.iterations, warmup_iterations=run.warmup_iterations, collective=job.collective,
            records_path=str(out_dir / f"{file_stem(job.name, r)}.jsonl"), timeout_s=run.timeout_s, seed=run.seed,
            start_gate=run.start_gate, rank_machines=tuple(s.machine for s in placement.slots),
            shift_path=run.shift_path)
        for r, slot in enumerate(placement.slots)
    ]


def ready_path(spec: WorkerSpec) -> str:
    """The file a gated worker creates once it has joined its process group."""
    return spec.records_path + ".ready"


def worker_argv(spec_path: str | Path) -> list[str]:
    """The command that runs one worker."""
    return [sys.executable, "-m", "workers.worker", str(spec_path)]


def worker_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of a worker: ``base`` (default ``os.environ``) plus the project root on
    ``PYTHONPATH``, unbuffered output, and one intra-op thread unless ``OMP_NUM_THREADS`` is set
    (several workers share few cores)."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (PROJECT_ROOT, env.get("PYTHONPATH")) if x)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def local_exec(machine: str, argv: list[str], env: dict, log_path: str) -> subprocess.Popen:
    """An ``exec_fn`` that runs the command as a local subprocess (``machine`` is ignored)."""
    with open(log_path, "w", encoding="utf-8") as log:
        return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=PROJECT_ROOT)


def launch(specs: Sequence[WorkerSpec], exec_fn: ExecFn, out_dir: str | Path) -> list[RunningWorker]:
    """Write each spec to ``out_dir`` and start its worker with ``exec_fn``.

    If ``exec_fn`` fails for one rank, the workers already started are killed and
    :class:`JobError` is raised.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = worker_env()
    started: list[RunningWorker] = []
    for spec in specs:
        stem = out_dir / file_stem(spec.job, spec.rank)
        spec_path, log_path = f"{stem}.json", f"{stem}.log"
        spec.save(spec_path)
        try:
            proc = exec_fn(spec.machine, worker_argv(spec_path), dict(env), log_path)
        except Exception as exc:
            stop_all(started)
            raise JobError(f"job {spec.job!r}: cannot start rank {spec.rank} on {spec.machine}: "
                           f"{type(exc).__name__}: {exc}") from exc
        started.append(RunningWorker(spec, proc, spec_path, log_path))
    return started


def processes(workers: Sequence[RunningWorker]) -> list[subprocess.Popen]:
    """Each process of ``workers`` once (the ranks of one agent share its process)."""
    return list({id(w.process): w.process for w in workers}.values())


def stop_all(workers: Sequence[RunningWorker], grace_s: float = 5.0) -> None:
    """Kill (SIGKILL, by PID) every worker still running and reap it; idempotent."""
    for w in workers:
        if w.process.poll() is None:
            w.process.kill()
    for w in workers:
        try:
            w.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass  # unkillable within grace_s (stuck in the kernel); nothing more we may do


def log_tail(path: str | Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ('' if it cannot be read)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


LIVENESS_INTERVAL_S = 0.5
"""How often :func:`wait_all` and :func:`open_gate_when_ready` call their ``check``: the bound on
how late the death of a process the run depends on (controller, switch daemon) is noticed."""


def _checker(check, interval_s: float = LIVENESS_INTERVAL_S):
    """``check`` called at most every ``interval_s`` (a no-op when ``check`` is None)."""
    last = [0.0]

    def maybe():
        now = time.monotonic()
        if check is not None and now - last[0] >= interval_s:
            last[0] = now
            check()

    return maybe


def wait_all(workers: Sequence[RunningWorker], timeout_s: float, poll_s: float = 0.05, check=None) -> list[int]:
    """Wait until every worker has exited successfully.

    ``check`` (optional) is called every :data:`LIVENESS_INTERVAL_S` and raises when something
    the workers depend on died; every worker is then stopped and its exception propagates.

    Returns:
        The exit codes (all 0), in the order of ``workers``.

    Raises:
        JobError: a worker exited non-zero (the lowest such rank is named, with its exit code,
            log path and the last lines of its log) or ``timeout_s`` passed (the lowest rank
            still running is named). Either way every other worker is killed first.
    """
    deadline = time.monotonic() + timeout_s
    alive = _checker(check)
    while True:
        try:
            alive()
        except BaseException:
            stop_all(workers)
            raise
        codes = [w.process.poll() for w in workers]
        error = exit_failure(workers, codes)
        if error is not None:
            stop_all(workers)
            raise error
        if all(c == 0 for c in codes):
            return codes
        if time.monotonic() > deadline:
            stop_all(workers)
            raise timeout_failure(workers, codes, timeout_s)
        time.sleep(poll_s)


def exit_failure(workers: Sequence[RunningWorker], codes: Sequence[int | None]) -> JobError | None:
    """The error of the lowest rank that exited non-zero (exit code, log path, the log's last lines),
    None when none has; ``codes`` are the workers' ``poll()`` results, in order."""
    failed = [w for w, c in zip(workers, codes, strict=True) if c not in (None, 0)]
    if not failed:
        return None
    w = min(failed, key=lambda x: x.spec.rank)
    return JobError(f"job {w.spec.job!r}: rank {w.spec.rank} on {w.spec.machine} failed with exit "
                    f"code {w.process.returncode}; log: {w.log_path}\n{log_tail(w.log_path)}")


def timeout_failure(workers: Sequence[RunningWorker], codes: Sequence[int | None], timeout_s: float) -> JobError:
    """The error of workers past ``timeout_s``: the ranks still running (``codes`` None) and the lowest
    one's log."""
    running = [w for w, c in zip(workers, codes, strict=True) if c is None]
    w = min(running or workers, key=lambda x: x.spec.rank)
    return JobError(f"job {w.spec.job!r}: timed out after {timeout_s:g} s with ranks "
                    f"{[x.spec.rank for x in running]} still running; log of rank {w.spec.rank}: "
                    f"{w.log_path}\n{log_tail(w.log_path)}")


def open_gate_when_ready(workers: Sequence[RunningWorker], gate_path: str, timeout_s: float,
                         poll_s: float = 0.05, check=None) -> float | None:
    """Open the start gate once every gated worker has joined its process group.

    Workers launched with ``start_gate=gate_path`` signal readiness with :func:`ready_path`.
    When all have, the gate file is created and every job starts its iterations at once.

    Returns:
        Seconds waited until the gate opened, or None if a worker exited first (the caller's
        :func:`wait_all` then reports it).

    Raises:
        JobError: ``timeout_s`` passed before every worker was ready (all are stopped).
        Whatever ``check`` raises (as in :func:`wait_all`; all workers are stopped first).
    """
    t0 = time.monotonic()
    alive = _checker(check)
    while True:
        try:
            alive()
        except BaseException:
            stop_all(workers)
            raise
        if all(os.path.exists(ready_path(w.spec)) for w in workers):
            Path(gate_path).write_text(f"{time.time()}\n", encoding="utf-8")
            return time.monotonic() - t0
        if any(w.process.poll() is not None for w in workers):
            return None
        if time.monotonic() - t0 > timeout_s:
            stop_all(workers)
            waiting = sorted((w.spec.job, w.spec.rank) for w in workers if not os.path.exists(ready_path(w.spec)))
            raise JobError(f"workers not ready after {timeout_s:g} s (job, rank): {waiting[:8]}")
        time.sleep(poll_s)
