"""ECN marking at the egress of every emulated switch port.

Two real paths, chosen by :func:`emulator.variants.resolve_ecn` from the machine's capabilities and recorded
with every run: ``red``, kernel RED with ECN as the FIFO under each port's shaper, where the kernel
has ``sch_red``; ``bpf``, where it has none, :class:`BpfMarker`: the program in
``emulator/bpf/vq_ecn.bpf.c`` on each port's ``clsact`` egress hook, marking CE when a virtual
queue drained at the port's configured rate holds more than K. The BPF object is compiled by the
set-up (``.venv/bin/python -m emulator.ecn build``); one program and its maps are loaded once per network,
pinned in a private bpffs mount, and shared by every port.

How each path marks and what it counts: ``docs/ecn.md`` (How it works).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

from common.errors import EmulationError
from common.units import mbps_to_bytes_per_s
from emulator.bpfmap import PinnedMap
from measure import shaping
from measure.marking import MAX_RAMP_NS, MarkingParams, bytes_to_ns

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "bpf", "vq_ecn.bpf.c")
OBJECT = os.path.join(HERE, "bpf", "vq_ecn.bpf.o")
class EcnUnavailable(EmulationError):
    """The configured ECN marking cannot run on this machine."""


def port_config_bytes(params: MarkingParams, rate_mbps: float) -> bytes:
    """The ``port_cfg`` map value of a port (layout of ``struct port_cfg``)."""
    k = bytes_to_ns(params.threshold_bytes, rate_mbps)
    kmax = max(k, bytes_to_ns(params.max_threshold_bytes, rate_mbps))
    if kmax - k > MAX_RAMP_NS:
        raise EcnUnavailable(f"marking ramp K..K_max is {(kmax - k) / 1e9:.1f} s at {rate_mbps:g} Mbit/s; "
                             f"at most {MAX_RAMP_NS / 1e9:g} s is supported")
    max_p = min(2 ** 32, int(round(params.max_p * 2 ** 32)))
    return struct.pack("<QQQQQQ", int(round(mbps_to_bytes_per_s(rate_mbps))), k, kmax, max_p,
                       bytes_to_ns(params.limit_bytes, rate_mbps), bytes_to_ns(params.burst_bytes, rate_mbps))


def red_qdisc_args(params: MarkingParams, rate_mbps: float, mtu: int) -> list[str]:
    """``tc qdisc`` arguments of a RED-with-ECN FIFO with the marker's thresholds.

    RED needs K_max > K; step marking (K_max == K) becomes a one-packet ramp. ``burst`` is
    the smallest RED accepts for K, which makes the average follow the queue closely.
    """
    avpkt = shaping.frame_bytes(mtu)
    lo = max(avpkt, int(params.threshold_bytes))
    hi = max(lo + avpkt, int(params.max_threshold_bytes))
    limit = max(int(params.limit_bytes), hi + avpkt)
    burst = max(2, (2 * lo + hi) // (3 * avpkt) + 1)
    return ["red", "limit", str(limit), "min", str(lo), "max", str(hi), "avpkt", str(avpkt), "burst", str(burst),
            "bandwidth", f"{rate_mbps:.6f}mbit", "probability", f"{params.max_p:g}", "ecn"]


# -- building the BPF object --------------------------------------------------------------------


def bpf_missing(compile_too: bool = True) -> str | None:
    """What the BPF marker needs (to load and attach; and to compile) that this machine lacks, or None."""
    tools = [("bpftool", "bpftool"), ("tc", "iproute2"), ("mount", "mount")]
    if compile_too:
        tools.append(("clang", "clang"))
    for tool, package in tools:
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {package}; run scripts/setup.sh)"
    if compile_too and not os.path.exists("/usr/include/bpf/bpf_helpers.h"):
        return "libbpf headers are not installed (Debian package libbpf-dev; run scripts/setup.sh)"
    version = subprocess.run(["tc", "-V"], capture_output=True, text=True).stdout
    if "libbpf" not in version:
        return f"tc is not built with libbpf ({version.strip()}); it cannot attach BPF programs"
    return None


def bpf_marker_missing() -> str | None:
    """Why the BPF marker cannot run here (compiling it if needed); None: it can."""
    why = bpf_missing(compile_too=False)
    if why is None:
        try:
            build()
            trial_load()
        except EmulationError as e:
            why = str(e)
    return why


def trial_load() -> None:
    """Load the marker into the kernel and unload it again; raise EcnUnavailable if the kernel refuses."""
    marker = BpfMarker()
    try:
        marker.start({})
    except EmulationError as e:
        raise EcnUnavailable(f"the kernel did not load the BPF ECN marker: {e}") from None
    finally:
        marker.stop()


def multiarch_include() -> list[str]:
    """clang's include flag for this machine's multiarch headers (``asm/types.h`` for BPF programs)."""
    cp = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True) if shutil.which("gcc") else None
    arch = cp.stdout.strip() if cp and cp.returncode == 0 else f"{os.uname().machine}-linux-gnu"
    return [f"-I/usr/include/{arch}"]


def build(force: bool = False) -> str:
    """Compile the marker if its object is missing or older than its source; return the object's path."""
    if not force and os.path.exists(OBJECT) and os.path.getmtime(OBJECT) >= os.path.getmtime(SOURCE):
        return OBJECT
    why = bpf_missing()
    if why:
        raise EcnUnavailable(f"the BPF ECN marker cannot be built: {why}")
    tmp = OBJECT + ".tmp"
    cp = subprocess.run(["clang", "-O2", "-g", "-Wall", "-target", "bpf", *multiarch_include(), "-c", SOURCE,
                         "-o", tmp], capture_output=True, text=True)
    if cp.returncode != 0:
        raise EcnUnavailable(f"the BPF ECN marker did not compile: {cp.stderr.strip()}")
    os.replace(tmp, OBJECT)
    return OBJECT


# -- the BPF marker -----------------------------------------------------------------------------


def _hex(b: bytes) -> str:
    return " ".join(f"{x:02x}" for x in b)


def _ip(addr_be: int) -> str:
    return socket.inet_ntoa(struct.pack("<I", addr_be))


PORT_STATS_SIZE = 8 + 8 * 8  # struct port_stats: spin lock (padded to 8) + eight u64
PORT_STATS_LAYOUT = "<4x4x8Q"  # the lock, its padding, busy_until_ns, then PORT_STATS_FIELDS
PORT_STATS_FIELDS = ("pkts", "bytes", "ect_pkts", "marks", "over_not_ect", "vq_drops", "max_backlog_ns")


class BpfMarker:
    """The virtual-queue marker, loaded once and attached to many switch ports.

    Use :meth:`start` with every port's rate and thresholds, read :meth:`port_counters` and
    :meth:`flow_counters`, and :meth:`stop` (idempotent) to detach it from every port,
    unmount its bpffs and unload it.
    """

    def __init__(self, obj_path: str | None = None, record=None):
        self.obj_path = obj_path or OBJECT
        self.record = record  # a emulator.journal.RunJournal for the pin mount, or None
        self.pin_dir: str | None = None
        self.prog_id: int | None = None
        self.ports: dict[str, int] = {}  # interface -> ifindex
        self._by_index: dict[int, str] = {}
        self._stats_map: PinnedMap | None = None

    def _bpftool(self, *args: str, json_out: bool = False):
        argv = ["bpftool", *(["-j"] if json_out else []), *args]
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if cp.returncode != 0:
            raise EmulationError(f"`{' '.join(argv[:6])} ...` failed: {(cp.stderr or cp.stdout).strip()[:400]}")
        return json.loads(cp.stdout) if json_out else cp.stdout

    def start(self, ports: dict[str, tuple[float, MarkingParams]]) -> None:
        """Load the program and attach it to every ``interface -> (rate Mbit/s, params)``."""
        if not os.path.exists(self.obj_path):
            raise EcnUnavailable(f"the BPF ECN marker is not built ({self.obj_path}); run `make setup`")
        self.pin_dir = tempfile.mkdtemp(prefix="testbed-bpf-")
        if self.record is not None:
            from emulator.journal import Change

            self.record.add(Change("dir", self.pin_dir, what="ECN marker pins"))
            self.record.add(Change("mount", self.pin_dir, what="ECN marker bpffs"))
        cp = subprocess.run(["mount", "-t", "bpf", "bpf", self.pin_dir], capture_output=True, text=True)
        if cp.returncode != 0:
            os.rmdir(self.pin_dir)
            self.pin_dir = None
            raise EcnUnavailable(f"cannot mount a bpffs for the ECN marker: {cp.stderr.strip()}")
        os.chmod(self.pin_dir, 0o700)  # a fresh bpffs is world-writable (1777): the pins are root's alone
        self._bpftool("prog", "load", self.obj_path, f"{self.pin_dir}/prog", "type", "classifier",
                      "pinmaps", f"{self.pin_dir}/maps")
        self.prog_id = self._bpftool("prog", "show", "pinned", f"{self.pin_dir}/prog", json_out=True)["id"]
        for intf in ports:
            with open(f"/sys/class/net/{intf}/ifindex") as f:
                idx = int(f.read())
            self.ports[intf] = idx
            self._by_index[idx] = intf
        self.configure(ports, reset=True)
        for intf in sorted(self.ports):
            for cmd in (["tc", "qdisc", "replace", "dev", intf, "clsact"],
                        ["tc", "filter", "replace", "dev", intf, "egress", "pref", "1", "handle", "1", "bpf", "da",
                         "object-pinned", f"{self.pin_dir}/prog"]):
                cp = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
                if cp.returncode != 0:
                    raise EmulationError(f"`{' '.join(cmd)}` failed: {cp.stderr.strip()}")

    def configure(self, ports: dict[str, tuple[float, MarkingParams]], reset: bool = False) -> None:
        """Set the rate and thresholds of attached ports (``reset`` also zeroes their counters)."""
        if not ports:
            return
        batch = []
        for intf, (rate, params) in sorted(ports.items()):
            key = _hex(struct.pack("<I", self.ports[intf]))
            batch.append(f"map update pinned {self.pin_dir}/maps/port_cfg key hex {key} "
                         f"value hex {_hex(port_config_bytes(params, rate))}")
            if reset:
                batch.append(f"map update pinned {self.pin_dir}/maps/port_stats key hex {key} "
                             f"value hex {_hex(bytes(PORT_STATS_SIZE))}")
        with tempfile.NamedTemporaryFile("w", suffix=".bpftool", delete=False) as f:
            f.write("\n".join(batch) + "\n")
        try:
            self._bpftool("batch", "file", f.name)
        finally:
            os.unlink(f.name)

    def port_counters(self) -> dict[str, dict]:
        """Counters of every port: pkts, bytes, ect_pkts, marks, over_not_ect, vq_drops,
        max_backlog_ns, and backlog_ns (the virtual backlog now).

        Read straight from the pinned map (:class:`emulator.bpfmap.PinnedMap`, well under a
        millisecond), so the sampler's real and virtual backlogs are close in time.
        """
        if self._stats_map is None:
            self._stats_map = PinnedMap(f"{self.pin_dir}/maps/port_stats", 4, PORT_STATS_SIZE)
        entries = self._stats_map.items()
        now_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)  # bpf_ktime_get_ns() is CLOCK_MONOTONIC
        out = {}
        for key, value in entries:
            intf = self._by_index.get(struct.unpack("<I", key)[0])
            if intf is None:
                continue
            busy_until, *counters = struct.unpack(PORT_STATS_LAYOUT, value)
            d = dict(zip(PORT_STATS_FIELDS, counters, strict=True))
            d["backlog_ns"] = max(0, busy_until - now_ns)
            out[intf] = d
        return out

    def flow_counters(self) -> list[dict]:
        """Counters per port and IPv4 flow: intf, src, sport, dst, dport, pkts, bytes, marks."""
        entries = self._bpftool("map", "dump", "pinned", f"{self.pin_dir}/maps/flow_stats", json_out=True)
        out = []
        for e in entries:
            k, v = e["formatted"]["key"], e["formatted"]["value"]
            intf = self._by_index.get(k["ifindex"])
            if intf is None:
                continue
            out.append({"intf": intf, "src": _ip(k["saddr"]), "sport": k["sport"], "dst": _ip(k["daddr"]),
                        "dport": k["dport"], "pkts": v["pkts"], "bytes": v["bytes"], "marks": v["marks"]})
        return out

    def close(self) -> None:
        """Let go of the maps without detaching (the owner's record unmounts the pins and removes
        the ports, which unloads the program). Idempotent."""
        if self._stats_map is not None:
            self._stats_map.close()
            self._stats_map = None

    def stop(self) -> None:
        """Detach from every port that still exists, unmount the pins (unloading the program). Idempotent."""
        existing = set(os.listdir("/sys/class/net"))
        for intf in self.ports:
            if intf in existing:
                subprocess.run(["tc", "qdisc", "del", "dev", intf, "clsact"], capture_output=True, timeout=30)
        self.ports.clear()
        self._by_index.clear()
        self.close()
        if self.pin_dir is not None:
            subprocess.run(["umount", self.pin_dir], capture_output=True)
            try:
                os.rmdir(self.pin_dir)
            except OSError:
                pass
            self.pin_dir = None
        if self.prog_id is not None:
            wait_unloaded(self.prog_id)
            self.prog_id = None


def wait_unloaded(prog_id: int, timeout_s: float = 5.0) -> None:
    """Wait until a BPF program nothing holds any more is freed (after an RCU grace period)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and subprocess.run(
            ["bpftool", "prog", "show", "id", str(prog_id)], capture_output=True).returncode == 0:
        time.sleep(0.05)


def stale_pin_dirs() -> list[str]:
    """bpffs mounts a crashed run left behind (``/tmp/testbed-bpf-*``)."""
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 2 and fields[2] == "bpf" and os.path.basename(fields[1]).startswith("testbed-bpf-"):
                out.append(fields[1])
    return out


def main(argv: list[str]) -> int:
    """``.venv/bin/python -m emulator.ecn build``: compile the marker (used by the set-up)."""
    if argv[:1] != ["build"]:
        print("usage: .venv/bin/python -m emulator.ecn build", file=sys.stderr)
        return 2
    try:
        print(f"ecn: BPF marker built: {build(force='--force' in argv)}")
    except EcnUnavailable as e:
        print(f"ecn: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
