"""The light replay runtime: one agent per emulated machine runs every rank placed on it.

``python -m workers.agent PLAN.json`` runs inside a machine's host (:class:`AgentPlan`). Each rank is a
thread doing what :mod:`workers.worker` does in ``replay`` mode, except that an allreduce is the
collective's exact point-to-point pattern (:func:`jobs.patterns.replay_pattern`) over plain TCP, one
connection per communicating rank pair, with in-memory hand-over between ranks of one machine; an
INA job's machine sums its ranks and streams the sum through :class:`ina.client.InaClient`. Every
cross-machine byte crosses the fabric as the torch runtime's would, at a fraction of its cost.

How it runs a job, its barriers and checks, INA jobs, the files it writes and its exit codes:
``docs/fidelity.md`` (How the agent runs a job). Standard library only (no torch).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import queue
import socket
import struct
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from common.errors import JobError
from jobs.collective import collective_of
from jobs.modes import work_mode
from jobs.patterns import barrier_bytes, replay_pattern
from jobs.phase import ShiftFollower
from jobs.records import record_iteration
from workers.launcher import (
    ExecFn,
    InaEndpoint,
    RunningWorker,
    WorkerSpec,
    ina_counters_path,
    read_json_file,
    ready_path,
    stop_all,
    worker_env,
    write_json_file,
)

HEADER = struct.Struct("!HHHII")
"""Message header: job index, source rank, destination rank, sequence number, payload bytes."""
HELLO_SEQ = 0xFFFFFFFF
"""Sequence number of the first message on a connection, naming its job and rank pair."""
CONNECT_RETRY_S = 0.05
RECV_CHUNK_BYTES = 1 << 18
_CLOSED = object()


@dataclasses.dataclass(frozen=True)
class AgentPlan:
    """What one machine's agent runs in one wave; JSON-serialisable.

    Attributes:
        machine: the machine this agent runs on.
        addr: IP address the agent listens on (the machine's).
        port: TCP port every agent of the wave listens on.
        agents: IP address of every machine's agent in the wave.
        jobs: names of every job of the wave, in one order shared by all agents (a job's index
            in this list is its id in message headers).
        job_machines: for each job with a rank here, the machine of each of its ranks.
        ranks: the specs of the ranks this agent runs.
        conns_path: file the agent writes its connections to, per job, once they are open.
        tcp_path: file the agent writes, at the end, what the kernel's TCP counters say of every
            connection (payload bytes acknowledged and received, retransmitted segments).
        timeout_s: wall-clock limit of connecting and of every wait for a message.
        ina: this machine's endpoint of each INA job with a rank here.
        ina_path: file the agent writes each INA job's client counters to.
    """

    machine: str
    addr: str
    port: int
    agents: dict
    jobs: tuple[str, ...]
    job_machines: dict
    ranks: tuple[WorkerSpec, ...]
    conns_path: str
    tcp_path: str
    timeout_s: float
    ina: dict = dataclasses.field(default_factory=dict)
    ina_path: str = ""

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return {"machine": self.machine, "addr": self.addr, "port": self.port, "agents": dict(self.agents),
                "jobs": list(self.jobs), "job_machines": {j: list(m) for j, m in self.job_machines.items()},
                "ranks": [r.to_dict() for r in self.ranks], "conns_path": self.conns_path,
                "tcp_path": self.tcp_path, "timeout_s": self.timeout_s,
                "ina": {j: e.to_dict() for j, e in self.ina.items()}, "ina_path": self.ina_path}

    @classmethod
    def from_dict(cls, d: Mapping) -> "AgentPlan":
        """Inverse of :meth:`to_dict`; a malformed plan raises :class:`JobError`."""
        try:
            return cls(machine=d["machine"], addr=d["addr"], port=int(d["port"]), agents=dict(d["agents"]),
                       jobs=tuple(d["jobs"]), job_machines={j: tuple(m) for j, m in d["job_machines"].items()},
                       ranks=tuple(WorkerSpec.from_dict(r) for r in d["ranks"]), conns_path=d["conns_path"],
                       tcp_path=d["tcp_path"], timeout_s=float(d["timeout_s"]),
                       ina={j: InaEndpoint.from_dict(e) for j, e in d.get("ina", {}).items()},
                       ina_path=str(d.get("ina_path", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise JobError(f"bad agent plan: {type(exc).__name__}: {exc}") from None

    def save(self, path: str | Path) -> None:
        """Write the plan as JSON."""
        write_json_file(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "AgentPlan":
        """Read a plan written by :meth:`save`."""
        return cls.from_dict(read_json_file(path, "agent plan"))


def plan_agents(specs_by_job: Mapping[str, list[WorkerSpec]], machine_ip: Mapping[str, str], port: int,
                out_dir: str | Path, timeout_s: float,
                ina: Mapping[str, Mapping[str, InaEndpoint]] | None = None) -> list[AgentPlan]:
    """One :class:`AgentPlan` per machine hosting a rank of the wave's jobs (pure).

    Args:
        specs_by_job: every job of the wave with its rank specs (:func:`workers.launcher.plan_workers`).
        machine_ip: IP address of each machine.
        port: the agents' TCP port (each machine has its own address, so one port serves all).
        out_dir: directory of the agents' connection files.
        timeout_s: the agents' wall-clock limit of every wait.
        ina: for each job whose collective aggregates in the fabric, each of its machines' endpoint.

    Raises:
        JobError: a rank not in replay mode, or an INA job without an endpoint on one of its machines.
    """
    ina = ina or {}
    jobs = tuple(specs_by_job)
    job_machines = {j: tuple(s.machine for s in sorted(specs, key=lambda s: s.rank))
                    for j, specs in specs_by_job.items()}
    by_machine: dict[str, list[WorkerSpec]] = {}
    for specs in specs_by_job.values():
        for s in specs:
            if work_mode(s.mode).trains:
                raise JobError(f"job {s.job!r}: the agent runtime replays buckets; mode {s.mode!r} needs the "
                               f"torch worker runtime")
            if collective_of(s.collective).aggregates_in_fabric and s.machine not in ina.get(s.job, {}):
                raise JobError(f"INA job {s.job!r} has no INA endpoint on {s.machine}")
            by_machine.setdefault(s.machine, []).append(s)
    agents = {m: machine_ip[m] for m in by_machine}
    out_dir = Path(out_dir)
    return [AgentPlan(machine=m, addr=machine_ip[m], port=port, agents=agents, jobs=jobs,
                      job_machines={j: job_machines[j] for j in jobs if any(s.job == j for s in ranks)},
                      ranks=tuple(ranks), conns_path=str(out_dir / f"agent-{m}.conns.json"),
                      tcp_path=str(out_dir / f"agent-{m}.tcp.json"), timeout_s=timeout_s,
                      ina={j: ina[j][m] for j in {s.job for s in ranks} if j in ina},
                      ina_path=ina_counters_path(out_dir, m))
            for m, ranks in by_machine.items()]


def agent_argv(plan_path: str | Path) -> list[str]:
    """The command that runs one agent."""
    return [sys.executable, "-m", "workers.agent", str(plan_path)]


def launch_agents(plans: list[AgentPlan], exec_fn: ExecFn, out_dir: str | Path) -> list[RunningWorker]:
    """Write each plan to ``out_dir`` and start its agent with ``exec_fn``.

    Returns one :class:`workers.launcher.RunningWorker` per rank (the ranks of one machine share
    its agent's process and log), so :func:`workers.launcher.wait_all` and
    :func:`workers.launcher.open_gate_when_ready` work unchanged. If ``exec_fn`` fails for one
    machine, the agents already started are killed and :class:`JobError` is raised.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = worker_env()
    started: list[RunningWorker] = []
    for plan in plans:
        plan_path, log_path = out_dir / f"agent-{plan.machine}.json", str(out_dir / f"agent-{plan.machine}.log")
        plan.save(plan_path)
        try:
            proc = exec_fn(plan.machine, agent_argv(plan_path), dict(env), log_path)
        except Exception as exc:
            stop_all(started)
            raise JobError(f"cannot start the agent on {plan.machine}: {type(exc).__name__}: {exc}") from exc
        started.extend(RunningWorker(spec, proc, str(plan_path), log_path) for spec in plan.ranks)
    return started


def read_conns(plans: list[AgentPlan]) -> dict[str, set[tuple[str, int, str, int]]]:
    """The connections of every job, as the agents wrote them (missing files are skipped)."""
    out: dict[str, set] = {}
    for plan in plans:
        try:
            data = json.loads(Path(plan.conns_path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for job, conns in data.items():
            out.setdefault(job, set()).update(tuple(c) for c in conns)
    return out


def rank_steps(collective: str, world: int, rank: int, size_bytes: int) -> list[tuple[list, list]]:
    """Per step of one allreduce, the ``(dst, bytes)`` sends and ``(src, bytes)`` receptions of ``rank``."""
    out = []
    for step in replay_pattern(collective, world, size_bytes):
        out.append(([(d, b) for s, d, b in step if s == rank], [(s, b) for s, d, b in step if d == rank]))
    return out


def remote_pairs(collective: str, machines_by_rank: tuple[str, ...], sizes) -> set[tuple[int, int]]:
    """Rank pairs ``(a, b)``, ``a < b``, on different machines that exchange data in any of ``sizes``."""
    out = set()
    for size in set(sizes):
        for step in replay_pattern(collective, len(machines_by_rank), size):
            for s, d, b in step:
                if b and machines_by_rank[s] != machines_by_rank[d]:
                    out.add((min(s, d), max(s, d)))
    return out


class _Failure(Exception):
    """A rank or connection failed; carries the one-line reason."""


class Agent:
    """Runs one :class:`AgentPlan`: connects, runs every local rank as a thread, reports."""

    def __init__(self, plan: AgentPlan):
        self.plan = plan
        self.job_index = {j: i for i, j in enumerate(plan.jobs)}
        self.inbox: dict[tuple[str, int, int], queue.Queue] = {}
        self.conns: dict[tuple[str, int, int], socket.socket] = {}
        self.conn_rank: dict[tuple[str, int, int], int] = {}  # each connection's local rank (exactly one)
        self.readers: list[threading.Thread] = []
        self.error: str | None = None
        self.failed = threading.Event()
        self.lock = threading.Lock()
        self.local = {(s.job, s.rank) for s in plan.ranks}
        self.expected: set[tuple[str, int, int]] = set()
        self.ina_groups: dict[str, _InaGroup] = {}
        for job, machines in plan.job_machines.items():
            specs = [s for s in plan.ranks if s.job == job]
            if collective_of(specs[0].collective).aggregates_in_fabric:
                self.ina_groups[job] = _InaGroup(plan.ina[job], plan.addr, [s.rank for s in specs],
                                                 specs[0].world, plan.timeout_s)
                continue
            sizes = list(specs[0].bucket_bytes) + [barrier_bytes(len(machines))]
            for a, b in remote_pairs(specs[0].collective, machines, sizes):
                if (job, a) in self.local or (job, b) in self.local:
                    self.expected.add((job, a, b))
        for s in plan.ranks:
            for src in range(s.world):
                self.inbox[(s.job, s.rank, src)] = queue.Queue()

    # -- failures ------------------------------------------------------------------------
    def fail(self, where: str, exc: BaseException) -> None:
        """Record the first failure and wake everything up."""
        with self.lock:
            if self.error is None:
                self.error = f"{where}: {type(exc).__name__}: {' '.join(str(exc).split())}"
        self.failed.set()
        for q in self.inbox.values():
            q.put(_CLOSED)
        for group in self.ina_groups.values():
            group.barrier.abort()

    # -- connections ---------------------------------------------------------------------
    def connect_all(self) -> None:
        """Open the connections this machine initiates, accept the others; bounded by the timeout."""
        deadline = time.monotonic() + self.plan.timeout_s
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.plan.addr, self.plan.port))
        listener.listen(128)
        listener.settimeout(0.2)
        initiate = sorted(k for k in self.expected if (k[0], k[1]) in self.local)
        accept_n = len(self.expected) - len(initiate)
        for job, a, b in initiate:
            peer = self.plan.agents[self.plan.job_machines[job][b]]
            sock = self._dial(peer, deadline, f"job {job} rank {a} -> rank {b} at {peer}")
            sock.sendall(HEADER.pack(self.job_index[job], a, b, HELLO_SEQ, 0))
            self._register(job, a, b, sock)
        accepted = 0
        try:
            while accepted < accept_n:
                if time.monotonic() > deadline:
                    missing = sorted(self.expected - set(self.conns))
                    raise JobError(f"{len(missing)} connection(s) not opened by peers within "
                                   f"{self.plan.timeout_s:g} s: {missing[:4]}")
                try:
                    sock, _ = listener.accept()
                except socket.timeout:
                    continue
                sock.settimeout(self.plan.timeout_s)
                j, a, b, seq, n = HEADER.unpack(_recv_exact(sock, HEADER.size))
                if seq != HELLO_SEQ or j >= len(self.plan.jobs) or (self.plan.jobs[j], a, b) not in self.expected:
                    raise JobError(f"unexpected connection greeting (job {j}, ranks {a}-{b}, seq {seq})")
                self._register(self.plan.jobs[j], a, b, sock)
                accepted += 1
        finally:
            listener.close()

    def _dial(self, addr: str, deadline: float, what: str) -> socket.socket:
        while True:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(max(0.1, min(2.0, deadline - time.monotonic())))
            try:
                sock.bind((self.plan.addr, 0))  # the machine's own address, whatever the routes say
                sock.connect((addr, self.plan.port))
                return sock
            except OSError as exc:
                sock.close()
                if time.monotonic() > deadline:
                    raise JobError(f"cannot connect {what} within {self.plan.timeout_s:g} s: {exc}") from None
                time.sleep(CONNECT_RETRY_S)

    def _register(self, job: str, a: int, b: int, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.plan.timeout_s)
        self.conns[(job, a, b)] = sock
        remote = b if (job, a) in self.local else a
        local = a if remote == b else b
        self.conn_rank[(job, a, b)] = local
        t = threading.Thread(target=self._read, args=(job, remote, local, sock), daemon=True)
        t.start()
        self.readers.append(t)

    def _read(self, job: str, remote: int, local: int, sock: socket.socket) -> None:
        """Drain one connection into the local rank's inbox until the peer closes it."""
        scratch = memoryview(bytearray(RECV_CHUNK_BYTES))
        inbox = self.inbox[(job, local, remote)]
        want = (self.job_index[job], remote, local)
        try:
            while True:
                head = _recv_exact(sock, HEADER.size, eof_ok=True)
                if head is None:
                    break
                j, src, dst, seq, n = HEADER.unpack(head)
                if (j, src, dst) != want:
                    raise JobError(f"message for job {j} rank {src}->{dst} on the connection of job {job} "
                                   f"rank {remote}->{local}")
                left = n
                while left:
                    got = sock.recv_into(scratch, min(left, RECV_CHUNK_BYTES))
                    if not got:
                        raise JobError(f"connection from job {job} rank {remote} closed inside a message")
                    left -= got
                inbox.put((seq, n))
        except Exception as exc:  # noqa: BLE001 - any failure of the connection fails the agent, by name
            if not self.failed.is_set():
                peer = self.plan.job_machines[job][remote]
                self.fail(f"job {job} rank {local}", JobError(
                    f"connection with rank {remote} ({peer}) failed: {type(exc).__name__}: {exc}"))
            return
        inbox.put(_CLOSED)

    def rank_conns(self, job: str, rank: int) -> list[socket.socket]:
        """The connections whose local end is ``rank`` of ``job`` (a pair of ranks on one machine has none)."""
        return [sock for key, sock in sorted(self.conns.items()) if key[0] == job and self.conn_rank[key] == rank]

    def write_conns(self) -> None:
        """The TCP connections of each job (local ip, port, remote ip, port), for ECN attribution."""
        out: dict[str, list] = {j: [] for j in self.plan.job_machines}
        for (job, _, _), sock in self.conns.items():
            out[job].append([*sock.getsockname(), *sock.getpeername()])
        Path(self.plan.conns_path).write_text(json.dumps(out) + "\n", encoding="utf-8")

    # -- ranks ---------------------------------------------------------------------------
    def run(self) -> None:
        """Connect, signal readiness, run every rank to completion; raises :class:`_Failure`."""
        self.connect_all()
        self.write_conns()
        for spec in self.plan.ranks:
            Path(spec.records_path).write_text("", encoding="utf-8")
        for spec in self.plan.ranks:
            Path(ready_path(spec)).write_text(f"{time.time()}\n", encoding="utf-8")
        threads = [threading.Thread(target=self._rank_main, args=(s,), daemon=True) for s in self.plan.ranks]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive() and not self.failed.is_set():
                t.join(0.1)
        if self.error:
            raise _Failure(self.error)
        for sock in self.conns.values():
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the peer may have closed first; nothing of ours is left to send
        deadline = time.monotonic() + self.plan.timeout_s
        for t in self.readers:
            t.join(max(0.0, deadline - time.monotonic()))
        if self.error:
            raise _Failure(self.error)
        self.write_tcp()
        self.write_ina()

    def write_ina(self) -> None:
        """Each INA job's client counters (packets sent, resends, timeouts, results with ECN, ...)."""
        if self.ina_groups:
            out = {j: dataclasses.asdict(g.client.stats) for j, g in self.ina_groups.items()}
            Path(self.plan.ina_path).write_text(json.dumps(out, indent=0) + "\n", encoding="utf-8")

    def close(self) -> None:
        """Close the INA clients' sockets."""
        for group in self.ina_groups.values():
            group.client.close()

    def write_tcp(self) -> None:
        """What the kernel says each connection carried (read after both ends finished sending)."""
        out = []
        for (job, a, b), sock in sorted(self.conns.items()):
            local = a if (job, a) in self.local else b
            out.append({"job": job, "local_rank": local, "remote_rank": b if local == a else a,
                        **tcp_counters(sock)})
        Path(self.plan.tcp_path).write_text(json.dumps(out, indent=0) + "\n", encoding="utf-8")

    def _rank_main(self, spec: WorkerSpec) -> None:
        try:
            _Rank(self, spec).run()
        except Exception as exc:  # noqa: BLE001 - reported as the agent's one line
            self.fail(f"job {spec.job} rank {spec.rank}", exc)


class _Rank:
    """One rank of one job, run as a thread of its machine's agent."""

    def __init__(self, agent: Agent, spec: WorkerSpec):
        self.agent, self.spec = agent, spec
        self.machines = agent.plan.job_machines[spec.job]
        self.job_id = agent.job_index[spec.job]
        self.sent_seq: dict[int, int] = {}
        self.recv_seq: dict[int, int] = {}
        self.ina = agent.ina_groups.get(spec.job)
        self.ce_socks = agent.rank_conns(spec.job, spec.rank)
        largest = max([*spec.bucket_bytes, barrier_bytes(spec.world)])
        self.buf = bytearray(HEADER.size + largest) if self.ina is None else bytearray()
        self.steps = {} if self.ina is not None else {
            size: rank_steps(spec.collective, spec.world, spec.rank, size)
            for size in {*spec.bucket_bytes, barrier_bytes(spec.world)}}

    def run(self) -> None:
        spec = self.spec
        if spec.start_gate:
            deadline = time.monotonic() + spec.timeout_s
            while not os.path.exists(spec.start_gate):
                if self.agent.failed.is_set():
                    return
                if time.monotonic() > deadline:
                    raise JobError(f"start gate {spec.start_gate} did not open within {spec.timeout_s:.0f} s")
                time.sleep(0.02)
        sizes = list(spec.bucket_bytes)
        shift = ShiftFollower(spec.shift_path, announce=spec.rank == 0)
        for it in range(spec.warmup_iterations + spec.iterations):
            if it == spec.warmup_iterations:
                self.allreduce(barrier_bytes(spec.world))
            start_time_s = shift.start_in_phase()
            ce_start = ce_counts(self.ce_socks)
            t0 = time.perf_counter()
            time.sleep(spec.compute_s)
            t1 = time.perf_counter()
            times = self.allreduce_buckets(sizes)
            end = time.perf_counter()
            marks = ce_delta(ce_start, ce_counts(self.ce_socks))
            if it >= spec.warmup_iterations:
                record_iteration(spec, it - spec.warmup_iterations, start_time_s, t1 - t0, end - t0, sizes, times,
                                 phase=shift.record(), ecn_marks=marks)
        self.allreduce(barrier_bytes(spec.world))

    def allreduce_buckets(self, sizes: list[int]) -> list[float]:
        """An iteration's allreduces, one per bucket of ``sizes`` bytes, in order; each one's time,
        from the end of the one before (the first: from now). A ring's buckets go one after
        another; an INA job's machine streams them all at once (:meth:`_InaGroup.allreduce_stream`)."""
        if self.ina is not None:
            return self.ina.allreduce_stream(self.spec.rank, sizes)
        times = []
        for size in sizes:
            s = time.perf_counter()
            self.allreduce(size)
            times.append(time.perf_counter() - s)
        return times

    def allreduce(self, size: int) -> None:
        """Every step of one allreduce of ``size`` bytes: send, then wait for every reception
        (an INA job: its machine's group does it, :class:`_InaGroup`)."""
        if self.ina is not None:
            self.ina.allreduce(self.spec.rank, size)
            return
        for sends, recvs in self.steps[size]:
            for dst, n in sends:
                self.send(dst, n)
            for src, n in recvs:
                self.receive(src, n)

    def send(self, dst: int, nbytes: int) -> None:
        seq = self.sent_seq.get(dst, 0)
        self.sent_seq[dst] = seq + 1
        me, agent = self.spec.rank, self.agent
        if self.machines[dst] == self.machines[me]:
            agent.inbox[(self.spec.job, dst, me)].put((seq, nbytes))
            return
        HEADER.pack_into(self.buf, 0, self.job_id, me, dst, seq, nbytes)
        agent.conns[(self.spec.job, min(me, dst), max(me, dst))].sendall(
            memoryview(self.buf)[:HEADER.size + nbytes])

    def receive(self, src: int, nbytes: int) -> None:
        seq = self.recv_seq.get(src, 0)
        self.recv_seq[src] = seq + 1
        try:
            got = self.agent.inbox[(self.spec.job, self.spec.rank, src)].get(timeout=self.spec.timeout_s)
        except queue.Empty:
            raise JobError(f"no message from rank {src} ({self.machines[src]}) within "
                           f"{self.spec.timeout_s:g} s") from None
        if got is _CLOSED:
            if self.agent.failed.is_set():
                raise _Failure(self.agent.error or "another rank failed")
            raise JobError(f"rank {src} ({self.machines[src]}) closed its connection while a message was due")
        if got != (seq, nbytes):
            raise JobError(f"from rank {src}: message #{got[0]} of {got[1]} B, expected #{seq} of {nbytes} B")


class _InaGroup:
    """The ranks of one INA job on this machine: reduced in memory, summed over INA by one client.

    Each allreduce (or stream of them, an iteration's buckets): every local rank arrives (its
    gradients are in the machine's sum); the lowest local rank sends the sum, ``ceil(size / 4)``
    int32 lanes each holding the number of local ranks, through the client and checks every lane
    of the result is the job's world size; every local rank leaves with the result.
    """

    def __init__(self, endpoint: InaEndpoint, addr: str, local_ranks: list[int], world: int, timeout_s: float):
        from ina.client import InaClient

        self.client = InaClient(endpoint.job_id, endpoint.bit, endpoint.ps_addr, scale=1.0, bind=addr,
                                values_per_packet=endpoint.values_per_packet)
        self.leader, self.n_local, self.world = min(local_ranks), len(local_ranks), world
        self.barrier = threading.Barrier(len(local_ranks), timeout=timeout_s)
        self.failure: str | None = None
        self.times: list[float] = []  # the leader's last stream: each allreduce's time

    def allreduce(self, rank: int, size: int) -> None:
        """One allreduce of ``size`` bytes as local rank ``rank`` (see the class docstring).

        Raises:
            JobError: a wrong aggregate, or the INA exchange failed.
            _Failure: another rank failed meanwhile.
        """
        self.allreduce_stream(rank, [size])

    def allreduce_stream(self, rank: int, sizes: list[int]) -> list[float]:
        """Allreduces of ``sizes`` bytes each, streamed by the client as one
        (:meth:`ina.client.InaClient.allreduce_stream`), as local rank ``rank``: each one's time
        from the end of the one before (the first: from the last local rank's arrival). Raises as
        :meth:`allreduce`."""
        try:
            self.barrier.wait()
            if rank == self.leader:
                try:
                    start = time.monotonic()
                    got = self.client.allreduce_stream([[self.n_local] * max(1, -(-size // 4)) for size in sizes])
                    for size, (out, _) in zip(sizes, got, strict=True):
                        wrong = [i for i, v in enumerate(out) if v != self.world]
                        if wrong:
                            raise JobError(f"lane {wrong[0]} of a bucket of {size} B summed to {out[wrong[0]]}, "
                                           f"expected the world size {self.world} ({len(wrong)} lanes wrong)")
                    ends = [start] + [t for _, t in got]
                    self.times = [b - a for a, b in itertools.pairwise(ends)]
                except Exception as exc:  # noqa: BLE001 - reported by name; the barrier lets the others go
                    self.failure = f"INA allreduce of {sum(sizes)} B: {type(exc).__name__}: {exc}"
                    self.barrier.abort()
                    raise JobError(self.failure) from None
            self.barrier.wait()
            return list(self.times)
        except threading.BrokenBarrierError:
            raise _Failure(self.failure or "another rank of the machine failed during an INA allreduce") from None


TCP_INFO_FIELDS = struct.Struct("=24xI72xI16xQQ")
"""Of Linux's ``struct tcp_info``: ``tcpi_unacked`` (offset 24), ``tcpi_total_retrans`` (100),
``tcpi_bytes_acked`` (120) and ``tcpi_bytes_received`` (128)."""
UNACKED_WAIT_S = 2.0

TCP_INFO_CE = struct.Struct("=5xB242xI")
"""Of Linux's ``struct tcp_info`` (``include/uapi/linux/tcp.h``): ``tcpi_options`` (offset 5) and
``tcpi_received_ce`` (offset 248, after ``tcpi_total_rto_time``; added in Linux 6.18, so an older
kernel's reply is shorter than this)."""
TCPI_OPT_ECN = 0x08
"""The bit of ``tcpi_options`` set when the connection negotiated ECN."""


def ce_received(raw: bytes) -> int | None:
    """CE-marked packets a connection has received (``tcpi_received_ce``) from its ``TCP_INFO`` bytes.

    None when the connection did not negotiate ECN or the kernel's reply ends before the field.
    The receiver's counter is exact (it equals the host's ``IpExtInCEPkts`` over its connections)
    where the sender's ``tcpi_delivered_ce`` is not: with RFC 3168 ECN the receiver sets ECE on
    every ACK from a CE packet until the sender's CWR, and the sender counts every packet such an
    ACK covers (about twice the marks with CUBIC). Counted at the receiving end,
    each direction of a connection is counted once, by the rank it reaches.
    """
    if len(raw) < TCP_INFO_CE.size:
        return None
    options, received = TCP_INFO_CE.unpack_from(raw)
    return received if options & TCPI_OPT_ECN else None


def received_ce_supported() -> bool:
    """Whether this kernel's ``TCP_INFO`` reaches ``tcpi_received_ce`` (Linux 6.18 and later), asked
    of a loopback connection in the calling process's network namespace."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        with socket.create_connection(srv.getsockname()) as c:
            return len(c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 512)) >= TCP_INFO_CE.size


def ce_counts(socks: list[socket.socket]) -> tuple[int | None, ...]:
    """Each connection's :func:`ce_received`, now."""
    return tuple(ce_received(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_CE.size)) for s in socks)


def ce_delta(before: tuple[int | None, ...], after: tuple[int | None, ...]) -> int | None:
    """CE-marked packets received between two :func:`ce_counts` of the same connections (the
    kernel's counters are 32-bit and wrap); None when no connection measures them."""
    deltas = [(a - b) & 0xFFFFFFFF for b, a in zip(before, after, strict=True) if a is not None and b is not None]
    return sum(deltas) if deltas else None


def tcp_counters(sock: socket.socket, wait_s: float = UNACKED_WAIT_S) -> dict[str, int]:
    """Payload bytes this end sent that the peer acknowledged, payload bytes received, and
    segments retransmitted, from the kernel's ``TCP_INFO`` of ``sock``; waits up to ``wait_s``
    for the peer to acknowledge the last segments in flight (``unacked`` says how many were not)."""
    deadline = time.monotonic() + wait_s
    while True:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_FIELDS.size)
        unacked, retrans, acked, received = TCP_INFO_FIELDS.unpack(raw[:TCP_INFO_FIELDS.size])
        if not unacked or time.monotonic() > deadline:
            return {"bytes_acked": acked, "bytes_received": received, "retransmits": retrans,
                    "unacked_segments": unacked}
        time.sleep(0.01)


def _recv_exact(sock: socket.socket, n: int, eof_ok: bool = False) -> bytes | None:
    """Exactly ``n`` bytes from ``sock``; None at a clean end of stream when ``eof_ok``."""
    parts, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            if eof_ok and left == n:
                return None
            raise JobError(f"connection closed after {n - left} of {n} header bytes")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the agent described by the plan file in ``argv``; return the exit code."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m workers.agent PLAN.json", file=sys.stderr)
        return 2
    where = args[0]
    try:
        plan = AgentPlan.load(args[0])
        where = f"machine {plan.machine}"
        print(f"agent on {plan.machine}: {len(plan.ranks)} rank(s) of {len(plan.job_machines)} job(s), "
              f"listening on {plan.addr}:{plan.port}", flush=True)
        t0 = time.monotonic()
        agent = Agent(plan)
        try:
            agent.run()
        finally:
            agent.close()
        print(f"agent on {plan.machine}: done in {time.monotonic() - t0:.1f} s", flush=True)
    except _Failure as exc:
        print(f"workers.agent: {where}: {exc}", file=sys.stderr, flush=True)
        os._exit(1)  # rank and reader threads may be blocked in the kernel: do not wait for them
    except Exception as exc:  # noqa: BLE001 - the launcher reads this one line from the log
        msg = " ".join(str(exc).split())
        print(f"workers.agent: {where}: {type(exc).__name__}: {msg}", file=sys.stderr, flush=True)
        os._exit(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
