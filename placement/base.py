"""The placement interface: jobs, GPU slots, placements, the cluster and its read-only view.

A placement policy is a decision over a read-only :class:`ClusterView`::

    placements = policy.place(pending, view)

It returns one :class:`Placement` for each pending job it decides to start now (in the
order it wants them applied) and leaves the others waiting. A policy never mutates the
cluster; the runner alone applies decisions with :meth:`Cluster.apply`. Policies that place
several jobs in one call track the GPUs they have already handed out with
:class:`Tentative`.

The loop asks for the whole decision, :meth:`PlacementPolicy.decide`: the placements, and, for a
policy that times jobs as well as placing them (Cassini), the :class:`TimeShift` of each job it
aligns and a JSON entry for the run's decision log (:class:`PlacementDecision`). A policy that
ranks alternatives of another one (Cassini again) asks that one for
:meth:`PlacementPolicy.candidates`: up to ``k`` decisions it rates equal, in its order of
preference; a policy that knows only one answer gives that one.
"""

from __future__ import annotations

import abc
import dataclasses
import types
from typing import Iterable, Mapping, Sequence

from common.errors import PlacementError

BACKGROUND_JOB = "_background"


@dataclasses.dataclass(frozen=True)
class JobRequest:
    """A data-parallel training job waiting to be placed.

    Attributes:
        name: unique job name.
        model: model profile name (see ``jobs.models``).
        workers: number of workers, one GPU each.
        collective: allreduce algorithm name (see ``workers.collectives``).
        arrival_s: arrival time in seconds (0 for a static experiment).
        machines: the machine of each rank, when the experiment pins the job (the ``pinned``
            policy places it there, :mod:`placement.pinned`); empty: not pinned.
        compute_ms: its compute time per iteration in place of its model's, ms; 0: the model's
            (``jobs.models.job_model``).
    """

    name: str
    model: str
    workers: int
    collective: str = "ring"
    arrival_s: float = 0.0
    machines: tuple[str, ...] = ()
    compute_ms: float = 0.0

    def __post_init__(self):
        if self.workers < 1:
            raise PlacementError(f"job {self.name!r}: workers must be >= 1, got {self.workers}")


@dataclasses.dataclass(frozen=True, order=True)
class GpuSlot:
    """One GPU: a machine name and a GPU index on it (0-based)."""

    machine: str
    gpu: int


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a job runs.

    Attributes:
        job: the job name.
        slots: one GPU slot per worker, in rank order (rank ``r`` runs on ``slots[r]``).
        ps_host: machine hosting a parameter server, if the job uses one.
        ina_switches: the switches that may aggregate this job in the network (an INA job,
            :mod:`emulator.ina_runs`): None when the policy leaves it to the run (every INA
            switch), ``()`` for none (the job's packets go to its PS unaggregated: NetPack's INA
            turned off for it).
    """

    job: str
    slots: tuple[GpuSlot, ...]
    ps_host: str | None = None
    ina_switches: tuple[str, ...] | None = None

    @property
    def machines(self) -> tuple[str, ...]:
        """Machines used, in order of first appearance in rank order."""
        return tuple(dict.fromkeys(s.machine for s in self.slots))

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return {
            "job": self.job,
            "slots": [[s.machine, s.gpu] for s in self.slots],
            "ps_host": self.ps_host,
            "ina_switches": list(self.ina_switches) if self.ina_switches is not None else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "Placement":
        """Inverse of :meth:`to_dict`."""
        return cls(
            job=d["job"],
            slots=tuple(GpuSlot(m, int(g)) for m, g in d["slots"]),
            ps_host=d.get("ps_host"),
            ina_switches=tuple(d["ina_switches"]) if d.get("ina_switches") is not None else None,
        )


@dataclasses.dataclass(frozen=True)
class PlacementContext:
    """What the run tells a policy that costs its jobs' transfers (``context=`` of its constructor,
    from :func:`placement.make_policy`; never a spec keyword).

    Attributes:
        mtu: count a transfer's bytes on the wire at this MTU (None: its payload), as the back end does.
        latency_s: the software latency of every cross-machine message, paper-scale seconds.
        scale: the run's scale factor (bytes and rates divided by it alike; 1: paper scale).
        timings: jobs' iteration and Up times measured alone, ms: job -> ``(iter_ms, up_ms)``
            (Cassini's profiles take them where given).
    """

    mtu: int | None = None
    latency_s: float = 0.0
    scale: float = 1.0
    timings: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.mtu, self.latency_s, self.scale, tuple(sorted(self.timings.items()))))


@dataclasses.dataclass(frozen=True)
class TimeShift:
    """Where a job's iterations should start: at the decision's time plus ``shift_s``, modulo
    ``period_s`` (Cassini's time-shift against a common origin, ``docs/resolutions.md`` Cassini §5.4).

    Attributes:
        job: the job name (placed now or already running).
        shift_s: its shift, seconds in ``[0, period_s)``.
        period_s: its iteration time the shift is taken modulo, seconds (> 0).
    """

    job: str
    shift_s: float
    period_s: float

    def __post_init__(self):
        if not (self.period_s > 0 and 0 <= self.shift_s < self.period_s + 1e-9):
            raise PlacementError(f"job {self.job!r}: a time shift needs 0 <= shift_s < period_s, got "
                                 f"shift_s={self.shift_s!r}, period_s={self.period_s!r}")

    def to_dict(self) -> dict:
        """JSON form."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class PlacementDecision:
    """One call's whole decision: where jobs start, how the aligned jobs are timed, and its log.

    Attributes:
        placements: the jobs that start now, as :meth:`PlacementPolicy.place` returns them.
        shifts: the jobs to align (started now or running), each with its time shift.
        log: a JSON object for the run's decision log (None: the policy logs nothing).
    """

    placements: tuple[Placement, ...]
    shifts: tuple[TimeShift, ...] = ()
    log: Mapping | None = None


@dataclasses.dataclass(frozen=True)
class MachineInfo:
    """Static facts about one machine: its GPU count and where it sits in the fabric."""

    name: str
    gpus: int
    rack: str
    pod: str


class ClusterView:
    """Read-only view of the cluster that policies decide over.

    Machines are listed in a stable order (the topology's machine order). Free GPUs of a
    machine are listed in increasing index order.
    """

    def __init__(self, cluster: "Cluster"):
        self._c = cluster

    @property
    def machines(self) -> tuple[MachineInfo, ...]:
        """All machines, in stable order."""
        return self._c._machines

    def machine(self, name: str) -> MachineInfo:
        """Facts about one machine."""
        return self._c._by_name[name]

    def free_gpus(self, machine: str) -> tuple[int, ...]:
        """Indices of the free GPUs of ``machine``, ascending."""
        owners = self._c._owner[machine]
        return tuple(i for i, o in enumerate(owners) if o is None)

    def n_free(self, machine: str) -> int:
        """Number of free GPUs on ``machine``. O(1)."""
        return self._c._n_free[machine]

    def is_idle(self, machine: str) -> bool:
        """True when every GPU of ``machine`` is free. O(1)."""
        return self._c._n_free[machine] == self._c._by_name[machine].gpus

    def free_counts(self) -> Mapping[str, int]:
        """Every machine's number of free GPUs (a read-only mapping, O(1))."""
        return types.MappingProxyType(self._c._n_free)

    def job_machines(self) -> dict[str, tuple[str, ...]]:
        """Each job holding GPUs (background work left out): its machines, in the view's machine
        order. O(jobs x their machines)."""
        index = self._c._index
        return {job: tuple(sorted(ms, key=index.__getitem__)) for job, ms in self._c._jobs.items()
                if job != BACKGROUND_JOB}

    def owner(self, slot: GpuSlot) -> str | None:
        """Job occupying ``slot``, or None."""
        return self._c._owner[slot.machine][slot.gpu]

    @property
    def total_free(self) -> int:
        """Free GPUs in the whole cluster. O(1)."""
        return self._c._total_free

    @property
    def machines_in_use(self) -> int:
        """Machines with at least one GPU in use (background work included). O(1)."""
        return self._c._in_use

    @property
    def partly_used_machines(self) -> int:
        """Machines with some GPU in use and some GPU free. O(1)."""
        return self._c._partial

    @property
    def graph(self):
        """The topology graph (networkx), or None when the cluster was built without one."""
        return self._c.graph

    def racks(self) -> dict[str, list[str]]:
        """Machine names grouped by rack, racks and machines in stable order."""
        out: dict[str, list[str]] = {}
        for m in self.machines:
            out.setdefault(m.rack, []).append(m.name)
        return out


class Cluster:
    """The mutable cluster state: which job owns each GPU. Only the runner mutates it."""

    def __init__(self, machines: Sequence[MachineInfo], graph=None):
        if not machines:
            raise PlacementError("a cluster needs at least one machine")
        self._machines = tuple(machines)
        self._by_name = {m.name: m for m in self._machines}
        if len(self._by_name) != len(self._machines):
            raise PlacementError("duplicate machine names in cluster")
        self._owner: dict[str, list[str | None]] = {m.name: [None] * m.gpus for m in self._machines}
        self._index = {m.name: i for i, m in enumerate(self._machines)}
        self._n_free = {m.name: m.gpus for m in self._machines}
        self._total_free = sum(self._n_free.values())
        self._in_use = self._partial = 0  # machines with a GPU in use; of them, those with one free
        self._jobs: dict[str, dict[str, int]] = {}  # owner -> machine -> GPUs it holds there
        self.graph = graph

    @classmethod
    def from_topology(cls, graph) -> "Cluster":
        """Build a cluster from a topology graph (machines carry ``gpus``, ``rack``, ``pod``)."""
        machines = [
            MachineInfo(n, int(d["gpus"]), str(d.get("rack", n)), str(d.get("pod", "")))
            for n, d in graph.nodes(data=True)
            if d.get("role") == "machine"
        ]
        return cls(machines, graph=graph)

    def view(self) -> ClusterView:
        """A read-only view for policies."""
        return ClusterView(self)

    def copy(self) -> "Cluster":
        """An independent copy (same machines, same ownership)."""
        c = Cluster(self._machines, graph=self.graph)
        c._owner = {k: list(v) for k, v in self._owner.items()}
        c._n_free, c._total_free = dict(self._n_free), self._total_free
        c._in_use, c._partial = self._in_use, self._partial
        c._jobs = {j: dict(ms) for j, ms in self._jobs.items()}
        return c

    def _recount(self, machine: str) -> None:
        """Recount ``machine``'s free GPUs and holders from its owners (after a direct change)."""
        for ms in self._jobs.values():
            ms.pop(machine, None)
        self._jobs = {j: ms for j, ms in self._jobs.items() if ms}
        owners = self._owner[machine]
        for o in owners:
            if o is not None:
                held = self._jobs.setdefault(o, {})
                held[machine] = held.get(machine, 0) + 1
        free = sum(1 for o in owners if o is None)
        self._total_free += free - self._n_free[machine]
        self._set_free(machine, free)

    def _set_free(self, machine: str, free: int) -> None:
        """Set ``machine``'s free GPU count, keeping the counts of machines in use and partly used."""
        gpus, old = self._by_name[machine].gpus, self._n_free[machine]
        self._in_use += (free < gpus) - (old < gpus)
        self._partial += (0 < free < gpus) - (0 < old < gpus)
        self._n_free[machine] = free

    def snapshot(self) -> dict[str, tuple]:
        """Ownership of every GPU, for equality checks."""
        return {k: tuple(v) for k, v in self._owner.items()}

    def set_background(self, busy: Mapping[str, int]) -> None:
        """Mark the first ``busy[m]`` GPUs of each machine ``m`` as used by background work."""
        for name, n in busy.items():
            if name not in self._by_name:
                raise PlacementError(f"background load names unknown machine {name!r}")
            gpus = self._by_name[name].gpus
            if not 0 <= int(n) <= gpus:
                raise PlacementError(
                    f"background load on {name}: {n} busy GPUs, machine has {gpus}")
            for i in range(int(n)):
                self._owner[name][i] = BACKGROUND_JOB
            self._recount(name)

    def apply(self, placement: Placement) -> None:
        """Occupy the placement's GPUs; raises if any is unknown or already taken."""
        seen = set()
        for s in placement.slots:
            if s.machine not in self._owner or not 0 <= s.gpu < len(self._owner[s.machine]):
                raise PlacementError(f"job {placement.job}: no such GPU {s}")
            if s in seen or self._owner[s.machine][s.gpu] is not None:
                raise PlacementError(f"job {placement.job}: GPU {s} is not free")
            seen.add(s)
        held = self._jobs.setdefault(placement.job, {})
        taken: dict[str, int] = {}
        for s in placement.slots:
            self._owner[s.machine][s.gpu] = placement.job
            taken[s.machine] = taken.get(s.machine, 0) + 1
        for machine, n in taken.items():
            self._set_free(machine, self._n_free[machine] - n)
            held[machine] = held.get(machine, 0) + n
        self._total_free -= len(placement.slots)

    def release(self, job: str) -> None:
        """Free every GPU held by ``job``. O(its machines' GPUs)."""
        for machine, n in self._jobs.pop(job, {}).items():
            owners = self._owner[machine]
            for i, o in enumerate(owners):
                if o == job:
                    owners[i] = None
            self._set_free(machine, self._n_free[machine] + n)
            self._total_free += n


class Tentative:
    """Free-GPU bookkeeping for a policy that places several jobs in one decision.

    It lets the policy take GPUs from a view's free ones, so two placements of the same call
    never share a GPU, copying the free GPU list of a machine only when it first takes from it
    (O(1) to start on any cluster). The view itself is never changed.
    """

    def __init__(self, view: ClusterView):
        self.view = view
        self._free: dict[str, list[int]] = {}  # the machines this decision took from: their free GPUs left
        self._taken = 0

    def free(self, machine: str) -> list[int]:
        """Free GPU indices left on ``machine`` (ascending)."""
        return list(self._free[machine]) if machine in self._free else list(self.view.free_gpus(machine))

    def n_free(self, machine: str) -> int:
        """Number of free GPUs left on ``machine``."""
        return len(self._free[machine]) if machine in self._free else self.view.n_free(machine)

    def is_idle(self, machine: str) -> bool:
        """True when no GPU of ``machine`` is used, counting GPUs taken in this decision."""
        return self.n_free(machine) == self.view.machine(machine).gpus

    @property
    def total_free(self) -> int:
        """Free GPUs left in the cluster."""
        return self.view.total_free - self._taken

    def free_counts(self) -> dict[str, int]:
        """Every machine's number of free GPUs left, in the view's machine order. O(machines)."""
        counts = dict(self.view.free_counts())
        counts.update((m, len(free)) for m, free in self._free.items())
        return counts

    def best_fit(self, machines: Sequence[str], need: int) -> str | None:
        """The machine with the fewest free GPUs that still has ``need`` free; ties by list order."""
        fits = [m for m in machines if self.n_free(m) >= need]
        return min(fits, key=self.n_free) if fits else None

    def take(self, machine: str, n: int) -> list[GpuSlot]:
        """Take the ``n`` lowest-indexed free GPUs of ``machine``."""
        free = self._free.get(machine)
        if free is None:
            free = list(self.view.free_gpus(machine))
        if n > len(free):
            raise PlacementError(f"{machine} has {len(free)} free GPUs, asked for {n}")
        taken, self._free[machine] = free[:n], free[n:]
        self._taken += n
        return [GpuSlot(machine, g) for g in taken]


class PlacementPolicy(abc.ABC):
    """A placement policy. Subclasses set ``name`` and implement :meth:`place`.

    Constructor keyword arguments come from the policy's spec string
    (``"name,key=value,..."``) plus ``seed``.
    """

    name: str = ""

    def __init__(self, seed: int = 0):
        self.seed = seed

    @abc.abstractmethod
    def place(self, pending: Sequence[JobRequest], view: ClusterView) -> list[Placement]:
        """Decide which pending jobs start now and where.

        Args:
            pending: jobs waiting, in the scheduler's order.
            view: read-only cluster state.

        Returns:
            Placements for the jobs that start now; jobs without one wait.
        """

    def decide(self, pending: Sequence[JobRequest], view: ClusterView) -> PlacementDecision:
        """The whole decision of :meth:`place` (the loop's entry point); by default its placements alone."""
        return PlacementDecision(tuple(self.place(pending, view)))

    def candidates(self, pending: Sequence[JobRequest], view: ClusterView, k: int) -> list[list[Placement]]:
        """Up to ``k`` decisions this policy rates equal, in its order of preference (the first is
        :meth:`place`'s); by default that one alone. Distinct candidates, each a valid decision on
        ``view``."""
        return [self.place(pending, view)]


class InOrderPolicy(PlacementPolicy):
    """A policy that places pending jobs one at a time, in the scheduler's order.

    Subclasses implement :meth:`choose`. A job that does not fit waits (it is absent from the
    result) and later jobs may still start, unless ``strict_order`` stops at the first job that
    waits (no later job starts: head-of-line blocking, as a strict FIFO would have it).

    Args:
        seed: the policy's seed (unused by deterministic policies; kept for the common interface).
        strict_order: stop at the first pending job that does not fit.
    """

    def __init__(self, seed: int = 0, strict_order: bool = False):
        super().__init__(seed)
        self.strict_order = strict_order

    @abc.abstractmethod
    def choose(self, job: JobRequest, view: ClusterView, tentative: Tentative) -> list[GpuSlot] | None:
        """Take the job's GPUs from ``tentative`` (in rank order), or return None: the job waits.

        Called only when the cluster still has at least ``job.workers`` free GPUs.
        """

    def place(self, pending: Sequence[JobRequest], view: ClusterView) -> list[Placement]:
        """Place pending jobs in order with :meth:`choose`; jobs that do not fit wait."""
        jobs_by_name(pending)
        tentative = Tentative(view)
        out = []
        for job in pending:
            slots = self.choose(job, view, tentative) if job.workers <= tentative.total_free else None
            if slots is None:
                if self.strict_order:
                    break
                continue
            out.append(Placement(job.name, tuple(slots)))
        return out


def jobs_by_name(jobs: Iterable[JobRequest]) -> dict[str, JobRequest]:
    """Index jobs by name, rejecting duplicates."""
    out: dict[str, JobRequest] = {}
    for j in jobs:
        if j.name in out:
            raise PlacementError(f"duplicate job name {j.name!r}")
        out[j.name] = j
    return out
