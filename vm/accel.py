"""Which accelerator the VM runs under: KVM where a guest makes progress under it, else TCG.

``/dev/kvm`` answering is not enough: a nested guest can be created and then make no progress
(its kernel silent after the decompressor, all of its time in the host's system time). So the
probe boots the box's own kernel under KVM with no root file system and waits for the panic
that ends such a boot (``VFS: Unable to mount root fs``); ``panic=-1`` reboots at once and
``-no-reboot`` turns that into QEMU's exit. A kernel that gets there within
:data:`PROBE_TIMEOUT_S` runs under KVM; otherwise the VM runs under TCG (QEMU's software
emulation, several times slower), and the choice and its reason are printed and recorded.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import time

from emulator.journal import RunJournal, recorded
from emulator.procs import signal_group

PROBE_TIMEOUT_S = 30.0
"""A kernel reaches its root-mount panic in about 2 s under a working KVM, 5 s under TCG here."""
PANIC_MARKS = ("Kernel panic", "VFS: Unable to mount root")
QEMU = "qemu-system-x86_64"


@dataclasses.dataclass(frozen=True)
class Accel:
    """The accelerator chosen and why.

    Attributes:
        name: ``kvm`` or ``tcg``.
        why: one line: what the probe saw.
        probe_s: how long the KVM probe took (0 when it could not run).
    """

    name: str
    why: str
    probe_s: float = 0.0

    @property
    def libvirt_driver(self) -> str:
        """The libvirt domain type: ``kvm``, or ``qemu`` for software emulation."""
        return "kvm" if self.name == "kvm" else "qemu"

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "libvirt_driver": self.libvirt_driver}


def decide(kvm_device: bool, console: str | None, seconds: float, timeout_s: float = PROBE_TIMEOUT_S) -> Accel:
    """The choice from what the probe saw.

    Args:
        kvm_device: whether ``/dev/kvm`` is there to try.
        console: what the kernel printed under KVM; None when the probe timed out.
        seconds: how long the probe ran.
    """
    if not kvm_device:
        return Accel("tcg", "no /dev/kvm: software emulation (TCG)")
    if console is None:
        return Accel("tcg", f"a guest under KVM made no progress in {timeout_s:g} s (nested virtualization does not "
                            f"run here): software emulation (TCG)", seconds)
    if any(mark in console for mark in PANIC_MARKS):
        return Accel("kvm", f"a guest kernel under KVM reached its root mount in {seconds:.1f} s", seconds)
    last = console.strip().splitlines()[-1] if console.strip() else "nothing"
    return Accel("tcg", f"a guest under KVM stopped before its root mount (last line: {last[:80]!r}): "
                        f"software emulation (TCG)", seconds)


def probe_argv(kernel: str) -> list[str]:
    return [QEMU, "-accel", "kvm", "-m", "256", "-smp", "1", "-nodefaults", "-display", "none", "-serial", "stdio",
            "-monitor", "none", "-no-reboot", "-kernel", kernel, "-append", "console=ttyS0 panic=-1"]


def probe(kernel: str, record: RunJournal, timeout_s: float = PROBE_TIMEOUT_S) -> Accel:
    """Boot ``kernel`` under KVM without a root file system and decide from what it printed."""
    if not os.path.exists("/dev/kvm") or shutil.which(QEMU) is None:
        return decide(False, None, 0.0)
    start = time.monotonic()
    proc = subprocess.Popen(probe_argv(kernel), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    with recorded(proc, record, "KVM probe"):
        try:
            out, _ = proc.communicate(timeout=timeout_s)
            console: str | None = out.decode(errors="replace")
        except subprocess.TimeoutExpired:
            signal_group(proc.pid, signal.SIGKILL)
            proc.communicate()
            console = None
    return decide(True, console, time.monotonic() - start, timeout_s)
