"""MLTCP on the emulator: a TCP congestion control registered as BPF struct_ops for the run.

``congestion_control: mltcp_reno`` or ``mltcp_cubic`` in a config makes every emulated host's TCP
that MLTCP variant (:data:`VARIANTS`; ``docs/resolutions.md`` Cassini §6): Reno or CUBIC whose window
growth is scaled by ``F = slope × bytes_ratio + intercept``. The programs are
``emulator/bpf/mltcp_<variant>.bpf.c``; what they share is ``emulator/bpf/mltcp_common.h``. The run
compiles the variant if needed (``.venv/bin/python -m emulator.mltcp build``), registers it, writes the
config's parameters to its ``mltcp_cfg`` map and records the registration in the run journal,
which unregisters it. Where the kernel refuses the program, the run stops with one line
(:class:`MltcpUnavailable`); cluster mode is refused.

Where F applies in CUBIC ([R]), the accounting and the counters: ``docs/cassini.md`` (MLTCP on the
emulator).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import struct
import subprocess
import sys

from common.errors import EmulationError
from emulator.journal import Change
from emulator.procs import run_in_session

HERE = os.path.dirname(os.path.abspath(__file__))
BPF_DIR = os.path.join(HERE, "bpf")
COMMON_HEADER = os.path.join(BPF_DIR, "mltcp_common.h")
VMLINUX_H = os.path.join(BPF_DIR, "vmlinux.h")
BTF = "/sys/kernel/btf/vmlinux"
CFG_MAP = "mltcp_cfg"
STATS_MAP = "mltcp_stats"


@dataclasses.dataclass(frozen=True)
class MltcpVariant:
    """One MLTCP congestion control, a BPF struct_ops program.

    Attributes:
        name: its congestion-control name (``tcp_congestion_ops.name``), what a config's
            ``congestion_control`` says.
        source: its C file in ``emulator/bpf/``; the object is beside it (``.bpf.c`` -> ``.bpf.o``).
        struct_ops: the struct_ops map that registers it (``bpftool struct_ops`` names it so).
        scales: what F multiplies.
    """

    name: str
    source: str
    struct_ops: str
    scales: str

    @property
    def source_path(self) -> str:
        return os.path.join(BPF_DIR, self.source)

    @property
    def object_path(self) -> str:
        return os.path.join(BPF_DIR, self.source[: -len(".c")] + ".o")


VARIANTS = {v.name: v for v in (
    MltcpVariant("mltcp_reno", "mltcp_reno.bpf.c", "mltcp_reno", "Reno's additive increase"),
    MltcpVariant("mltcp_cubic", "mltcp_cubic.bpf.c", "mltcp_cubic",
                 "CUBIC's per-ACK increment toward its target and its Reno-friendly estimate's growth"),
)}
"""Congestion-control name -> its BPF program (the :class:`congestion.Mltcp` entries of
:data:`congestion.CONGESTION_CONTROLS`)."""


class MltcpUnavailable(EmulationError):
    """MLTCP cannot run on this machine (the message says why)."""


def variant(name: str) -> MltcpVariant:
    """The variant called ``name``.

    Raises:
        MltcpUnavailable: no such variant (the message lists them).
    """
    try:
        return VARIANTS[name]
    except KeyError:
        raise MltcpUnavailable(f"unknown MLTCP variant {name!r}; built: {', '.join(VARIANTS)}") from None


def tools_missing() -> str | None:
    """Which of the tools the set-up installs for building and registering the programs this
    machine lacks, or None."""
    for tool, package in (("bpftool", "bpftool"), ("clang", "clang")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {package}; run scripts/setup.sh)"
    if not os.path.exists("/usr/include/bpf/bpf_helpers.h"):
        return "libbpf headers are not installed (Debian package libbpf-dev; run scripts/setup.sh)"
    return None


def kernel_missing() -> str | None:
    """What the running kernel lacks for struct_ops programs (its BTF, :data:`BTF`), or None: no
    set-up can add it."""
    if not os.path.exists(BTF):
        return f"the kernel exposes no BTF ({BTF}): struct_ops programs cannot be loaded"
    return None


def missing() -> str | None:
    """What building and registering the programs needs that this machine lacks, or None."""
    return tools_missing() or kernel_missing()


def _stale(v: MltcpVariant) -> bool:
    if not os.path.exists(v.object_path):
        return True
    built = os.path.getmtime(v.object_path)
    return any(os.path.getmtime(p) > built for p in (v.source_path, COMMON_HEADER))


def build(v: MltcpVariant, force: bool = False) -> str:
    """Compile ``v`` if its object is missing or older than its source or the common header; its path.

    Raises:
        MltcpUnavailable: a tool is missing or the program does not compile.
    """
    if not force and not _stale(v):
        return v.object_path
    why = missing()
    if why:
        raise MltcpUnavailable(f"{v.name} cannot be built: {why}")
    with open(VMLINUX_H + ".tmp", "w") as f:
        cp = subprocess.run(["bpftool", "btf", "dump", "file", BTF, "format", "c"], stdout=f, stderr=subprocess.PIPE,
                            text=True, timeout=120)
    if cp.returncode != 0:
        raise MltcpUnavailable(f"{v.name} cannot be built: bpftool could not dump the kernel's BTF: "
                               f"{cp.stderr.strip()}")
    os.replace(VMLINUX_H + ".tmp", VMLINUX_H)
    from emulator.ecn import multiarch_include

    tmp = v.object_path + ".tmp"
    cp = subprocess.run(["clang", "-O2", "-g", "-Wall", "-target", "bpf", *multiarch_include(), f"-I{BPF_DIR}",
                         "-c", v.source_path, "-o", tmp], capture_output=True, text=True)
    if cp.returncode != 0:
        raise MltcpUnavailable(f"{v.name} did not compile: {cp.stderr.strip()[:400]}")
    os.replace(tmp, v.object_path)
    return v.object_path


def cfg_bytes(slope: float, intercept: float, gap_s: float) -> bytes:
    """The ``mltcp_cfg`` map value (``struct mltcp_cfg``): slope and intercept in thousandths, gap in µs."""
    return struct.pack("<IIII", round(slope * 1000), round(intercept * 1000), round(gap_s * 1e6), 0)


@dataclasses.dataclass(frozen=True)
class MltcpStats:
    """A registered variant's ``mltcp_stats`` counters, over all its flows since registration.

    Attributes:
        iterations: iterations started (the idle-gap rule fired).
        ca_acks: ACKs that grew a window in congestion avoidance (each scaled by F).
        ca_acks_above_intercept: of them, those with F above the intercept (a flow past the start
            of a learned iteration).
        f_sum_milli: the sum of F over ``ca_acks``, in thousandths.
    """

    iterations: int
    ca_acks: int
    ca_acks_above_intercept: int
    f_sum_milli: int

    @property
    def mean_f(self) -> float | None:
        """F averaged over the ACKs it scaled; None before any."""
        return self.f_sum_milli / 1000 / self.ca_acks if self.ca_acks else None


def _bpftool(*args: str, json_out: bool = False):
    argv = ["bpftool", *(["-j"] if json_out else []), *args]
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if cp.returncode != 0:
        raise MltcpUnavailable(f"`{' '.join(argv[:5])}` failed: {(cp.stderr or cp.stdout).strip()[:300]}")
    return json.loads(cp.stdout) if json_out else cp.stdout


STRUCT_OPS_IN_USE = "BPF_STRUCT_OPS_STATE_INUSE"
"""A registered struct_ops map's state; an unregistered one lingers (``TOBEFREE``) while a socket still
holds it."""


def struct_ops_in_use(name: str) -> list[tuple[int, dict]] | None:
    """``(map id, value)`` of every BPF struct_ops map ``name`` (a congestion control) registered in
    the kernel, from ``bpftool struct_ops dump``; None when ``bpftool`` answers something unreadable."""
    cp = run_in_session(["bpftool", "-j", "struct_ops", "show"])
    try:
        if cp.returncode != 0 or not any(m.get("name") == name for m in json.loads(cp.stdout or "[]")):
            return []
        entries = json.loads(run_in_session(["bpftool", "-j", "struct_ops", "dump", "name", name]).stdout)
        out, map_id = [], None
        for entry in entries:  # each map's info, then its value
            if "bpf_map_info" in entry:
                map_id = entry["bpf_map_info"]["id"]
                continue
            value = next(iter(entry.values()))
            # the state sits in ``common`` from Linux 6.9, at the value's top level before (6.1)
            if value.get("common", value)["state"] == STRUCT_OPS_IN_USE:
                out.append((map_id, value))
        return out
    except (ValueError, KeyError, TypeError, StopIteration):
        return None


def struct_ops_registered(name: str) -> bool:
    """Whether a BPF struct_ops map ``name`` (a congestion control) is registered in the kernel; True
    when ``bpftool`` answers something unreadable (an undo then still tries to unregister it)."""
    return struct_ops_in_use(name) != []


def unregister_struct_ops(name: str) -> str | None:
    """Unregister the BPF struct_ops map ``name`` if it is registered; None, or why it could not be."""
    in_use = struct_ops_in_use(name)
    if in_use == []:
        return None
    targets = [["id", str(map_id)] for map_id, _ in in_use] if in_use else [["name", name]]
    errors = [(cp.stderr or cp.stdout).strip() for cp in (run_in_session(["bpftool", "struct_ops", "unregister", *t])
                                                         for t in targets) if cp.returncode != 0]
    return None if not struct_ops_registered(name) else "; ".join(errors) or "still registered"


def unregister(changes: list[Change]) -> dict[Change, str | None]:
    """The journal's undo of ``struct_ops`` changes (:data:`emulator.journal.UNDO`): unregister each."""
    return {c: unregister_struct_ops(c.name) for c in changes}


def struct_ops_maps(struct_ops: str) -> dict[str, int]:
    """Name -> id of the maps the programs of the registered struct_ops ``struct_ops`` use.

    Raises:
        MltcpUnavailable: it is not registered (once), or ``bpftool`` fails.
    """
    in_use = struct_ops_in_use(struct_ops)
    if not in_use or len(in_use) > 1:
        raise MltcpUnavailable(f"struct_ops {struct_ops} is registered {'?' if in_use is None else len(in_use)} "
                               "times, not once")
    prog_ids = sorted(set(re.findall(r"/prog_id:(\d+)", json.dumps(in_use[0][1]))))
    map_ids = {m for p in prog_ids for m in _bpftool("prog", "show", "id", p, json_out=True).get("map_ids", [])}
    return {_bpftool("map", "show", "id", str(m), json_out=True)["name"]: m for m in sorted(map_ids)}


def _map_id(v: MltcpVariant, map_name: str) -> int:
    maps = struct_ops_maps(v.struct_ops)
    if map_name not in maps:
        raise MltcpUnavailable(f"{v.name} registered but its {map_name} map was not found (its maps: "
                               f"{', '.join(maps) or 'none'})")
    return maps[map_name]


def stats(name: str) -> MltcpStats:
    """The counters of the registered variant ``name``.

    Raises:
        MltcpUnavailable: unknown or not registered.
    """
    return map_stats(_map_id(variant(name), STATS_MAP))


def map_stats(map_id: int) -> MltcpStats:
    """The counters in the ``mltcp_stats`` map ``map_id`` (:func:`struct_ops_maps` finds it).

    Raises:
        MltcpUnavailable: no such map.
    """
    dump = _bpftool("map", "dump", "id", str(map_id), json_out=True)
    values = {_little_endian(e["key"]): _little_endian(e["value"]) for e in dump}
    return MltcpStats(*(values.get(i, 0) for i in range(len(dataclasses.fields(MltcpStats)))))


def _little_endian(hex_bytes: list[str]) -> int:
    """A key or value of ``bpftool -j map dump`` (bytes as hex strings) as an integer."""
    return int.from_bytes(bytes(int(b, 16) for b in hex_bytes), "little")


class MltcpCongestionControl:
    """The run's MLTCP: :meth:`start` registers it and sets its parameters; the run journal's record
    of it unregisters it (:func:`unregister_struct_ops`).

    Args:
        name: the congestion control (a key of :data:`VARIANTS`).
        slope, intercept: F's parameters (intercept > 0, §6.4 4.).
        gap_s: the idle gap that starts a new iteration, wall seconds.
        record: the run journal (an :class:`emulator.journal.RunJournal`), or None.

    Raises:
        MltcpUnavailable: ``name`` is no variant.
    """

    def __init__(self, name: str, slope: float, intercept: float, gap_s: float, record=None):
        self.variant = variant(name)
        self.slope, self.intercept, self.gap_s, self.record = slope, intercept, gap_s, record

    def start(self) -> None:
        """Build if needed, register, and write the parameters.

        Raises:
            MltcpUnavailable: it cannot be built, a variant of that name is already registered (not
                ours), or the kernel refuses it.
        """
        v = self.variant
        obj = build(v)
        if struct_ops_registered(v.struct_ops):
            raise MltcpUnavailable(f"a congestion control {v.name!r} is already registered (not by this run); "
                                   f"`bpftool struct_ops unregister name {v.struct_ops}` if it is a leftover")
        if self.record is not None:
            self.record.add(Change("struct_ops", v.struct_ops, what=f"MLTCP congestion control {v.name}"))
        try:
            _bpftool("struct_ops", "register", obj)
        except MltcpUnavailable as e:
            raise MltcpUnavailable(f"the kernel did not register {v.name}: {e}") from None
        value = cfg_bytes(self.slope, self.intercept, self.gap_s)
        _bpftool("map", "update", "id", str(_map_id(v, CFG_MAP)), "key", "0", "0", "0", "0",
                 "value", *(str(b) for b in value))


def main(argv: list[str]) -> int:
    """``.venv/bin/python -m emulator.mltcp build [--force]``: compile every variant where this machine can
    (never fails the set-up: MLTCP is optional; a run that asks for it says why it cannot)."""
    if argv[:1] != ["build"] or set(argv[1:]) - {"--force"}:
        print("usage: .venv/bin/python -m emulator.mltcp build [--force]", file=sys.stderr)
        return 2
    for v in VARIANTS.values():
        try:
            print(f"mltcp: {v.name}: {build(v, force='--force' in argv)}")
        except MltcpUnavailable as e:
            print(f"mltcp: not built: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
