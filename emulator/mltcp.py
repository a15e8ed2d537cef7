"""MLTCP on the emulator: a TCP congestion control registered as BPF struct_ops for the run.

``congestion_control: mltcp_reno`` in a config makes every emulated host's TCP MLTCP-Reno
(``emulator/bpf/mltcp.bpf.c``; ``shared/specs/cassini.md`` §6): Reno whose additive increase is
scaled by ``F = slope × bytes_ratio + intercept``, ``bytes_ratio`` being how far a flow is through
its iteration's bytes (the last iteration's, learned), iterations told apart by the idle-gap rule.
The run compiles the program if needed (the set-up does it: ``python -m emulator.mltcp build``,
with ``vmlinux.h`` from the kernel's BTF), registers it (``bpftool struct_ops register``), which
adds ``mltcp_reno`` to the kernel's congestion controls, writes the config's parameters to its
``mltcp_cfg`` map (the idle gap dilated), and records the registration in the run journal, which
unregisters it when the run ends, fails or is cleaned after a crash. Where the kernel refuses the
program, the run stops with one line saying why (:class:`MltcpUnavailable`).

Only this machine's kernel gets it: cluster mode (hosts on other servers) is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys

from common.errors import EmulationError
from emulator.journal import Change, struct_ops_registered

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "bpf", "mltcp.bpf.c")
OBJECT = os.path.join(HERE, "bpf", "mltcp.bpf.o")
VMLINUX_H = os.path.join(HERE, "bpf", "vmlinux.h")
BTF = "/sys/kernel/btf/vmlinux"
VARIANTS = {"mltcp_reno": "mltcp_reno"}
"""Congestion-control name -> the struct_ops map the object registers under that name."""
CFG_MAP = "mltcp_cfg"


class MltcpUnavailable(EmulationError):
    """MLTCP cannot run on this machine (the message says why)."""


def missing() -> str | None:
    """What building and registering the program needs that this machine lacks, or None."""
    for tool, package in (("bpftool", "bpftool"), ("clang", "clang")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {package}; run scripts/setup.sh)"
    if not os.path.exists(BTF):
        return f"the kernel exposes no BTF ({BTF}): struct_ops programs cannot be loaded"
    if not os.path.exists("/usr/include/bpf/bpf_helpers.h"):
        return "libbpf headers are not installed (Debian package libbpf-dev; run scripts/setup.sh)"
    return None


def build(force: bool = False) -> str:
    """Compile the program if its object is missing or older than its source; its path.

    Raises:
        MltcpUnavailable: a tool is missing or the program does not compile.
    """
    if not force and os.path.exists(OBJECT) and os.path.getmtime(OBJECT) >= os.path.getmtime(SOURCE):
        return OBJECT
    why = missing()
    if why:
        raise MltcpUnavailable(f"MLTCP cannot be built: {why}")
    with open(VMLINUX_H + ".tmp", "w") as f:
        cp = subprocess.run(["bpftool", "btf", "dump", "file", BTF, "format", "c"], stdout=f, stderr=subprocess.PIPE,
                            text=True, timeout=120)
    if cp.returncode != 0:
        raise MltcpUnavailable(f"MLTCP cannot be built: bpftool could not dump the kernel's BTF: {cp.stderr.strip()}")
    os.replace(VMLINUX_H + ".tmp", VMLINUX_H)
    from emulator.ecn import multiarch_include

    tmp = OBJECT + ".tmp"
    cp = subprocess.run(["clang", "-O2", "-g", "-Wall", "-target", "bpf", *multiarch_include(),
                         f"-I{os.path.dirname(VMLINUX_H)}", "-c", SOURCE, "-o", tmp], capture_output=True, text=True)
    if cp.returncode != 0:
        raise MltcpUnavailable(f"MLTCP did not compile: {cp.stderr.strip()[:400]}")
    os.replace(tmp, OBJECT)
    return OBJECT


def cfg_bytes(slope: float, intercept: float, gap_s: float) -> bytes:
    """The ``mltcp_cfg`` map value (``struct mltcp_cfg``): slope and intercept in thousandths, gap in µs."""
    return struct.pack("<IIII", round(slope * 1000), round(intercept * 1000), round(gap_s * 1e6), 0)


def _bpftool(*args: str, json_out: bool = False):
    argv = ["bpftool", *(["-j"] if json_out else []), *args]
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if cp.returncode != 0:
        raise MltcpUnavailable(f"`{' '.join(argv[:5])}` failed: {(cp.stderr or cp.stdout).strip()[:300]}")
    return json.loads(cp.stdout) if json_out else cp.stdout


class MltcpCongestionControl:
    """The run's MLTCP: :meth:`start` registers it and sets its parameters; the run journal's record
    of it unregisters it (:func:`emulator.journal.unregister_struct_ops`).

    Args:
        name: the congestion control (a key of :data:`VARIANTS`).
        slope, intercept: F's parameters (intercept > 0, §6.4 4.).
        gap_s: the idle gap that starts a new iteration, wall seconds.
        record: the run journal (an :class:`emulator.journal.RunJournal`), or None.
    """

    def __init__(self, name: str, slope: float, intercept: float, gap_s: float, record=None):
        if name not in VARIANTS:
            raise MltcpUnavailable(f"unknown MLTCP variant {name!r}; built: {', '.join(VARIANTS)}")
        self.name, self.slope, self.intercept, self.gap_s, self.record = name, slope, intercept, gap_s, record

    def start(self) -> None:
        """Build if needed, register, and write the parameters.

        Raises:
            MltcpUnavailable: it cannot be built, a variant of that name is already registered (not
                ours), or the kernel refuses it.
        """
        obj = build()
        if struct_ops_registered(self.name):
            raise MltcpUnavailable(f"a congestion control {self.name!r} is already registered (not by this run); "
                                   f"`bpftool struct_ops unregister name {self.name}` if it is a leftover")
        if self.record is not None:
            self.record.add(Change("struct_ops", self.name, what="MLTCP congestion control"))
        try:
            _bpftool("struct_ops", "register", obj)
        except MltcpUnavailable as e:
            raise MltcpUnavailable(f"the kernel did not register {self.name}: {e}") from None
        maps = [m for m in _bpftool("map", "show", json_out=True) if m.get("name") == CFG_MAP]
        if not maps:
            raise MltcpUnavailable(f"{self.name} registered but its {CFG_MAP} map was not found")
        value = cfg_bytes(self.slope, self.intercept, self.gap_s)
        _bpftool("map", "update", "id", str(max(m["id"] for m in maps)), "key", "0", "0", "0", "0",
                 "value", *(str(b) for b in value))


def main(argv: list[str]) -> int:
    """``python -m emulator.mltcp build``: compile the program where this machine can (never fails
    the set-up: MLTCP is optional; a run that asks for it says why it cannot)."""
    if argv[:1] != ["build"]:
        print("usage: python -m emulator.mltcp build", file=sys.stderr)
        return 2
    try:
        print(f"mltcp: {build(force='--force' in argv)}")
    except MltcpUnavailable as e:
        print(f"mltcp: not built: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
