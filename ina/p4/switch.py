"""A bmv2 switch running the INA aggregator: program its tables, read its counters.

A :class:`ina.p4.runtime.Bmv2Switch` (the process and its runtime CLI) programmed with the tables
of ``aggregator.p4``, its ``stats`` register read back as :class:`ina.aggregator.AggregatorStats`.
:class:`Bmv2Aggregator` adds and removes jobs by entry handle without touching the others' entries
or the registers, and gives a job with results multicast its own group.

Port directions, entry handles, multicast groups: ``docs/ina-internals.md`` (bmv2 running the
aggregator).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence

from ina.aggregator import Aggregator, AggregatorStats, JobEntry, JobTraffic, Role
from ina.p4.build import P4Error, Toolchain
from ina.p4.runtime import Bmv2Switch
from ina.protocol import MALFORMED_REASONS, check_slots

TO_PS, TO_WORKERS = 0, 1
STAT_NAMES: tuple[str, ...] = tuple(
    [f for f in AggregatorStats.__dataclass_fields__ if f != "malformed"]
    + [f"malformed:{r}" for r in MALFORMED_REASONS] + ["other"])
"""The ``stats`` register's entries in index order (``aggregator.p4``'s ``ST_*`` constants):
:class:`ina.aggregator.AggregatorStats`' counters, the malformed reasons, then ``other`` (non-INA
packets no ``plain`` entry forwards)."""
SLOT_REGISTERS = ("slot_state", "slot_key", "slot_bitmap", "slot_count", "slot_flags", "slot_values")
JOB_COUNTERS = ("job_to_ps", "job_to_workers")
"""The per-job packet counters (:class:`ina.aggregator.JobTraffic`'s fields in order), indexed by job id."""
_COUNTER_READ = re.compile(r"(job_to_ps|job_to_workers)\[(\d+)\]=\s*\(\d+ bytes, (\d+) packets\)")
"""A ``counter_read`` answer: ``job_to_ps[3]= (380 bytes, 2 packets)``."""
_ADDED = re.compile(r"Entry has been added with handle (\d+)")
_NODE = re.compile(r"node was created with handle (\d+)")
UNMETERED_PER_US, UNMETERED_BURST = 1000.0, 1_000_000
"""The ``pat`` meter's rates (per microsecond) and bursts when no PAT is set: 10^9 claims/s."""
MAX_GROUP = 0xFFFF
"""Multicast group ids and replica ids are 16 bits; 0 means none."""


@dataclasses.dataclass(frozen=True)
class _Group:
    """A job's results multicast group on one switch: its id, its nodes' handles and replica ids,
    and the handles of its ``ina_copy`` entries (one per node, same order)."""

    group: int
    nodes: tuple[int, ...]
    rids: tuple[int, ...]
    copies: tuple[int, ...]


def added_handles(cli_output: str, expected: int) -> list[int]:
    """The entry handles ``simple_switch_CLI`` printed for its ``table_add`` commands, in order.

    Args:
        cli_output: the output of one CLI session.
        expected: how many ``table_add`` commands the session ran.

    Raises:
        P4Error: not exactly ``expected`` handles printed.
    """
    handles = [int(h) for h in _ADDED.findall(cli_output)]
    if len(handles) != expected:
        raise P4Error(f"simple_switch_CLI printed {len(handles)} entry handles for {expected} table_add "
                      f"commands: {cli_output.strip()[-1000:]}")
    return handles


def _check_entries(jobs: Mapping[int, JobEntry]) -> None:
    """Check every entry as the software engine checks it, before anything is sent to the switch.

    Raises:
        InaError: a bad entry.
    """
    scratch = Aggregator(1)
    for job_id, e in jobs.items():
        scratch.install_entry(job_id, e)


def _job_args(e: JobEntry, group: int = 0) -> str:
    """The ``set_job`` action's parameters of a checked entry (``group``: its results multicast
    group, 0 for none)."""
    return f"{e.fan_in} {int(Role(e.role) is Role.LEAF)} {e.out_bit} {int(bool(e.members))} {group}"


def _smallest_free(used: Iterable[int], n: int) -> list[int]:
    """The ``n`` smallest ids in 1..:data:`MAX_GROUP` not in ``used``.

    Raises:
        P4Error: fewer than ``n`` are free.
    """
    taken, out, i = set(used), [], 1
    while len(out) < n and i <= MAX_GROUP:
        if i not in taken:
            out.append(i)
        i += 1
    if len(out) < n:
        raise P4Error(f"no {n} free multicast ids left on the switch")
    return out


def _member_adds(job_id: int, e: JobEntry) -> list[str]:
    """The ``ina_member`` entries of a job: one per source address it may send from."""
    return [f"table_add ina_member NoAction {job_id} {addr} =>" for addr in sorted(e.members)]


class Bmv2Aggregator(Bmv2Switch):
    """A :class:`ina.p4.runtime.Bmv2Switch` running ``aggregator.p4``, its tables kept by entry handle.

    Args: as :class:`ina.p4.runtime.Bmv2Switch`'s.
    """

    def __init__(self, toolchain: Toolchain, program: str, ports: Mapping[int, str], thrift_port: int,
                 device_id: int, log_path: str, netns: str | None = None):
        super().__init__(toolchain, program, ports, thrift_port, device_id, log_path, netns)
        self._handles: dict[int, int] | None = {}
        """``ina_job`` entry handle by job id; None after a failed update (see ``docs/ina-internals.md``)."""
        self._members: dict[int, list[int]] = {}  # job id -> handles of its ina_member entries
        self._groups: dict[int, _Group] = {}  # job id -> its results multicast group
        self._copy_port: int | None = None  # where a group's copies leave (configure)

    def configure(self, n_slots: int, jobs: Mapping[int, JobEntry], routes: Mapping[int, int] | None = None,
                  plain: Mapping[str, int] | None = None) -> None:
        """Program the tables: slots in use, the per-job entries, where each direction leaves
        (``routes``: :data:`TO_PS`/:data:`TO_WORKERS` -> port; none: back out of the ingress
        port) and plain Ethernet forwarding (destination MAC -> port). The ``ina_job`` entries'
        handles are recorded for :meth:`add_jobs` and :meth:`remove_jobs`.

        Raises:
            InaError: a bad slot count or table entry (nothing sent to the switch).
            P4Error: the CLI refused a command or did not print every entry's handle.
        """
        check_slots(n_slots)
        job_ids = sorted(jobs)
        _check_entries(jobs)
        self._handles = None
        stale, self._groups = list(self._groups.values()), {}
        self._destroy_groups(stale)
        self.cli(["table_clear ina_copy"])
        self._copy_port = (routes or {}).get(TO_WORKERS, next(iter(self.ports)) if len(self.ports) == 1 else None)
        self._groups = self._create_groups(jobs)
        groups = {j: g.group for j, g in self._groups.items()}
        cmds = [f"table_set_default ina_config set_slots {n_slots - 1}", "table_clear ina_job",
                "table_clear ina_member", "table_clear ina_out", "table_clear plain"]
        adds = []  # what each table_add of the session adds: (job id, True for its ina_job entry)
        for j in job_ids:
            cmds.append(f"table_add ina_job set_job {j} => {_job_args(jobs[j], groups.get(j, 0))}")
            adds.append((j, True))
            members = _member_adds(j, jobs[j])
            cmds += members
            adds += [(j, False)] * len(members)
        for direction, port in sorted((routes or {}).items()):
            cmds.append(f"table_add ina_out to_port {direction} => {port}")
        for mac, port in sorted((plain or {}).items()):
            cmds.append(f"table_add plain to_port {mac} => {port}")
        handles = added_handles(self.cli(cmds), sum(c.startswith("table_add ") for c in cmds))
        self._handles, self._members = {}, {}
        self._record(adds, handles)  # the jobs' adds come first

    def _create_groups(self, jobs: Mapping[int, JobEntry]) -> dict[int, _Group]:
        """A results multicast group for each job of ``jobs`` with copies (see the module
        docstring), its ids distinct from the groups recorded, in two CLI sessions (nodes and
        ``ina_copy`` entries, then their association); job id -> its group (not recorded).

        Raises:
            P4Error: copies with no port towards the workers, no free ids, or the CLI refused.
        """
        wanted = {j: e.copies for j, e in sorted(jobs.items()) if e.copies}
        if not wanted:
            return {}
        if self._copy_port is None:
            raise P4Error(f"results multicast needs the port towards the workers (routes[{TO_WORKERS}]) on a "
                          f"switch with ports {sorted(self.ports)}")
        groups = _smallest_free((g.group for g in self._groups.values()), len(wanted))
        rids = iter(_smallest_free((r for g in self._groups.values() for r in g.rids),
                                   sum(len(c) for c in wanted.values())))
        layout = {j: (g, [next(rids) for _ in copies]) for (j, copies), g in zip(wanted.items(), groups, strict=True)}
        cmds = []
        for j, (g, rs) in layout.items():
            cmds.append(f"mc_mgrp_create {g}")
            for r, c in zip(rs, wanted[j], strict=True):
                cmds += [f"mc_node_create {r} {self._copy_port}", f"table_add ina_copy set_copy {r} => {c.ip} {c.mac}"]
        out = self.cli(cmds)
        n = sum(len(rs) for _, rs in layout.values())
        nodes, entries = [int(h) for h in _NODE.findall(out)], added_handles(out, n)
        if len(nodes) != n:
            raise P4Error(f"simple_switch_CLI printed {len(nodes)} node handles for {n} mc_node_create: {out[-1000:]}")
        nodes_it, entries_it = iter(nodes), iter(entries)
        made = {j: _Group(g, tuple(next(nodes_it) for _ in rs), tuple(rs), tuple(next(entries_it) for _ in rs))
                for j, (g, rs) in layout.items()}
        self.cli([f"mc_node_associate {g.group} {h}" for g in made.values() for h in g.nodes])
        return made

    def _destroy_groups(self, groups: Iterable[_Group]) -> None:
        """Undo :meth:`_create_groups` for these groups.

        Raises:
            P4Error: the CLI refused.
        """
        cmds = [c for g in groups for c in (
            *(f"mc_node_dissociate {g.group} {h}" for h in g.nodes), *(f"mc_node_destroy {h}" for h in g.nodes),
            *(f"table_delete ina_copy {h}" for h in g.copies), f"mc_mgrp_destroy {g.group}")]
        if cmds:
            self.cli(cmds)

    def _record(self, adds: Sequence[tuple[int, bool]], handles: Sequence[int]) -> None:
        for (job_id, is_job), handle in zip(adds, handles, strict=False):
            if is_job:
                self._handles[job_id] = handle
            else:
                self._members.setdefault(job_id, []).append(handle)

    def _known_handles(self) -> dict[int, int]:
        if self._handles is None:
            raise P4Error(f"the ina_job table of the switch on thrift port {self.thrift_port} is unknown after a "
                          f"failed update; configure() it again")
        return self._handles

    def _update(self, cmds: list[str], adds: Sequence[tuple[int, bool]], changed: Sequence[int],
                deleted: bool) -> None:
        """Run a session of ``ina_job``/``ina_member`` commands; record the handles of ``adds`` (one
        per ``table_add``, in order) after forgetting those of the ``changed`` jobs' members (and,
        where the session ``deleted`` their ``ina_job`` entries, those entries'; a modified entry
        keeps its handle)."""
        handles = self._known_handles()
        self._handles = None  # unknown until the whole session has gone through
        new = added_handles(self.cli(cmds), len(adds))
        for job_id in changed:
            self._members.pop(job_id, None)
            if deleted:
                handles.pop(job_id, None)
        self._handles = handles
        self._record(adds, new)

    def add_jobs(self, jobs: Mapping[int, JobEntry]) -> None:
        """Add these jobs' ``ina_job`` and ``ina_member`` entries (an id already installed: its
        ``ina_job`` entry modified in place, ``table_modify`` by handle, and its members replaced);
        every other entry, the slots and the counters untouched.

        Raises:
            InaError: a bad entry (nothing sent to the switch).
            P4Error: the CLI refused a command, or the handles are unknown (see ``docs/ina-internals.md``).
        """
        handles = self._known_handles()
        _check_entries(jobs)
        made = self._create_groups(jobs)
        stale = [self._groups.pop(j) for j in jobs if j in self._groups]  # destroyed once no entry names them
        self._groups.update(made)
        cmds, adds, replaced = [], [], []
        for job_id, e in sorted(jobs.items()):
            args = _job_args(e, made[job_id].group if job_id in made else 0)
            if job_id in handles:
                cmds.append(f"table_modify ina_job set_job {handles[job_id]} => {args}")
                cmds += [f"table_delete ina_member {h}" for h in self._members.get(job_id, [])]
                replaced.append(job_id)
            else:
                cmds.append(f"table_add ina_job set_job {job_id} => {args}")
                adds.append((job_id, True))
            members = _member_adds(job_id, e)
            cmds += members
            adds += [(job_id, False)] * len(members)
        if cmds:
            self._update(cmds, adds, replaced, deleted=False)
        self._destroy_groups(stale)

    def remove_jobs(self, job_ids: Iterable[int]) -> None:
        """Delete these jobs' ``ina_job`` and ``ina_member`` entries by handle (ids not installed
        are ignored); the slots (a removed job's are freed by their results) and the counters untouched.

        Raises:
            P4Error: the CLI refused a command, or the handles are unknown (see ``docs/ina-internals.md``).
        """
        handles = self._known_handles()
        removed = [j for j in sorted(set(job_ids)) if j in handles]
        cmds = [c for j in removed for c in (f"table_delete ina_job {handles[j]}",
                                             *(f"table_delete ina_member {h}" for h in self._members.get(j, [])))]
        if cmds:
            self._update(cmds, (), removed, deleted=True)
        self._destroy_groups([self._groups.pop(j) for j in removed if j in self._groups])

    def set_pat(self, rate_pps: float | None, burst: int = 1) -> None:
        """Meter claims at the switch's Peak Aggregation Throughput: ``rate_pps`` claims per second,
        ``burst`` deep (the program's ``pat`` meter, committed and peak rates alike; rule 8a of
        :mod:`ina.aggregator`). None: unmetered (a rate no claim stream reaches: bmv2 keeps a meter's
        rates once set).

        Raises:
            P4Error: a rate or burst out of range, or the CLI refused.
        """
        if rate_pps is not None and (not rate_pps > 0 or not burst >= 1):
            raise P4Error(f"PAT meter: need rate > 0 and burst >= 1, got {rate_pps!r} and {burst!r}")
        per_us, depth = (UNMETERED_PER_US, UNMETERED_BURST) if rate_pps is None else (rate_pps / 1e6, int(burst))
        self.cli([f"meter_set_rates pat 0 {per_us:.9f}:{depth} {per_us:.9f}:{depth}"])

    def release_slots(self) -> None:
        """Every slot free (the slot registers reset); the tables and the ``stats`` register stay."""
        self.cli([f"register_reset {r}" for r in SLOT_REGISTERS])

    def reset(self) -> None:
        """Every slot free and every counter 0 (the tables stay)."""
        self.cli([f"register_reset {r}" for r in (*SLOT_REGISTERS, "stats")]
                 + [f"counter_reset {c}" for c in JOB_COUNTERS])

    def job_traffic(self, job_ids: Iterable[int]) -> dict[int, JobTraffic]:
        """The packets of each of ``job_ids`` forwarded by direction (the ``job_to_ps`` and
        ``job_to_workers`` counters; :meth:`ina.aggregator.Aggregator.job_traffic`).

        Raises:
            P4Error: the CLI's answer does not hold every counter asked for.
        """
        ids = sorted(set(job_ids))
        if not ids:
            return {}
        out = self.cli([f"counter_read {c} {j}" for j in ids for c in JOB_COUNTERS])
        got = {(name, int(j)): int(n) for name, j, n in _COUNTER_READ.findall(out)}
        if len(got) != len(ids) * len(JOB_COUNTERS):
            raise P4Error(f"unexpected per-job counter read: {out.strip()[-500:]}")
        return {j: JobTraffic(*(got[c, j] for c in JOB_COUNTERS)) for j in ids}

    def counters(self) -> dict[str, int]:
        """The ``stats`` register by name (:data:`STAT_NAMES`).

        Raises:
            P4Error: the CLI's answer does not hold the register.
        """
        out = self.cli(["register_read stats"])
        m = re.search(r"stats=\s*([\d,\s]+)", out)
        values = [int(v) for v in m.group(1).replace(",", " ").split()] if m else []
        if len(values) != len(STAT_NAMES):
            raise P4Error(f"unexpected stats register read: {out.strip()[-500:]}")
        return dict(zip(STAT_NAMES, values, strict=True))


def aggregator_stats(counters: Mapping[str, int]) -> AggregatorStats:
    """Counters by :data:`STAT_NAMES` as the software engine reports them (``other`` left out)."""
    return AggregatorStats(**{k: v for k, v in counters.items() if ":" not in k and k != "other"},
                           malformed={r: counters[f"malformed:{r}"] for r in MALFORMED_REASONS})
