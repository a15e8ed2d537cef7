#!/usr/bin/env python3
"""What an emulated fabric costs this machine, per switch port: the switch daemon's memory, its
threads' CPU and the time to build and take down the network, per port kind and size.

Fat-trees of ``--sizes`` k and leaf-spines as large, with each switch port kind; per port kind the
memory per switch port (a least-squares line) and the largest fat-tree that fits this machine. What
is measured and how: ``docs/benchmarks.md`` (``bench/emulator_scale.py``).

    sudo .venv/bin/python bench/emulator_scale.py [--sizes 4,6,8] [--ports system,afxdp] [--fabrics fat_tree,leaf_spine]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiment.reporting.tables import format_table  # noqa: E402
from measure.footprint import RESERVE_BYTES, mem_available_bytes, switch_port_count  # noqa: E402

MB = 1024 * 1024


def status_kb(pid: int, key: str) -> int:
    """A ``/proc/<pid>/status`` figure in kB (``VmRSS``, ``VmHWM``)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def reset_peak(pid: int) -> None:
    """Set the daemon's ``VmHWM`` back to its current resident set (``clear_refs`` 5, Linux >= 4.0)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def fabric(kind: str, k: int):
    """A fat-tree of ``k``, or a leaf-spine with as many machines."""
    from topo import fat_tree, leaf_spine

    return fat_tree(k) if kind == "fat_tree" else leaf_spine(k, k // 2, k * k // 4)


def fit_line(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """Least-squares ``bytes = a + b * ports`` through ``(ports, bytes)``; None with fewer than two sizes."""
    if len({p for p, _ in points}) < 2:
        return None
    n = len(points)
    mx, my = sum(p for p, _ in points) / n, sum(b for _, b in points) / n
    b = sum((p - mx) * (y - my) for p, y in points) / sum((p - mx) ** 2 for p, _ in points)
    return my - b * mx, b


def measure(g, port_kind: str, out: str, idle_s: float) -> dict:
    """Build ``g`` with ``port_kind`` switch ports, measure, take it down."""
    from emulator.cpu import CLK_TCK, ovs_pid, thread_ticks
    from emulator.net import EmulatedNetwork, NetOptions
    from emulator.variants import switch_ports
    from topo import machines

    pid = ovs_pid()
    rss_before = status_kb(pid, "VmRSS") * 1024
    reset_peak(pid)
    free_before = mem_available_bytes()
    t0 = time.monotonic()
    net = EmulatedNetwork(g, out, NetOptions(scale=500.0, switch_ports=switch_ports(port_kind)))
    with net:
        up_s = time.monotonic() - t0
        hosts = machines(g)
        failures = net.tcp_check([hosts[0]], [hosts[-1]])
        before, t1 = thread_ticks(pid), time.monotonic()
        time.sleep(idle_s)
        after, t2 = thread_ticks(pid), time.monotonic()
        cpu = sum(after.get(t, 0) - before.get(t, 0) for t in after) / CLK_TCK / (t2 - t1)
        rss_up = status_kb(pid, "VmRSS") * 1024
        free_up = mem_available_bytes()
        t3 = time.monotonic()
    return {"up_s": up_s, "down_s": time.monotonic() - t3, "rss_before": rss_before, "rss_up": rss_up,
            "peak": status_kb(pid, "VmHWM") * 1024, "rss_after": status_kb(pid, "VmRSS") * 1024,
            "cpu_idle_cores": cpu, "tcp_ok": not failures, "machine_bytes": free_before - free_up}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4,6,8", help="fat-tree k values (even), smallest first")
    ap.add_argument("--ports", default="system,afxdp", help="switch port kinds")
    ap.add_argument("--fabrics", default="fat_tree,leaf_spine")
    ap.add_argument("--idle-s", type=float, default=5.0, help="seconds the daemon's idle CPU is measured over")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/emulator_scale.py: must run as root (Mininet): sudo .venv/bin/python bench/emulator_scale.py",
              file=sys.stderr)
        return 2

    from common.errors import TestbedError
    from emulator.capabilities import detect
    from emulator.cpu import ovs_pid
    from emulator.ports import resolve_port_type

    sizes = sorted(int(k) for k in args.sizes.split(","))
    caps = detect()
    if ovs_pid() is None:
        print("bench/emulator_scale.py: ovs-vswitchd is not running (scripts/setup.sh starts it)", file=sys.stderr)
        return 2
    kinds = []
    for kind in args.ports.split(","):
        try:
            kinds.append(resolve_port_type(kind, 1500, caps.ovs_datapath, caps.afxdp_missing)[0])
        except TestbedError as e:
            print(f"{kind}: skipped: {e}")
    rows, results, lines = [], [], {}
    for kind in dict.fromkeys(kinds):
        for fab in args.fabrics.split(","):
            for k in sizes:
                g = fabric(fab, k)
                ports = switch_port_count(g)
                line = fit_line(lines.get(kind, []))
                available = mem_available_bytes()
                if line is not None and line[0] + line[1] * ports + RESERVE_BYTES > available:
                    need = (line[0] + line[1] * ports) / MB
                    print(f"{fab} k={k} with {kind} ports: skipped: {need:,.0f} MB predicted, "
                          f"{available / MB:,.0f} MB available")
                    continue
                print(f"{fab} k={k}, {ports} switch ports, {kind}: building ...", flush=True)
                with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
                    try:
                        r = measure(g, kind, tmp, args.idle_s)
                    except TestbedError as e:
                        print(f"bench/emulator_scale.py: {fab} k={k} with {kind} ports: {e}", file=sys.stderr)
                        return 2
                grown = r["rss_up"] - r["rss_before"]
                lines.setdefault(kind, []).append((ports, r["machine_bytes"]))
                machines = sum(1 for _, d in g.nodes(data=True) if d["role"] == "machine")
                results.append({"fabric": fab, "k": k, "machines": machines, "switches": g.number_of_nodes() - machines,
                                "switch_ports": ports, "port_kind": kind, "datapath": caps.ovs_datapath, **r})
                rows.append([fab, str(machines), str(ports), kind, f"{r['up_s']:.1f}", f"{r['down_s']:.1f}",
                             f"{r['rss_before'] / MB:,.0f}", f"{r['rss_up'] / MB:,.0f}", f"{r['peak'] / MB:,.0f}",
                             f"{grown / ports / MB:.2f}", f"{r['machine_bytes'] / ports / MB:.2f}",
                             f"{r['rss_after'] / MB:,.0f}",
                             f"{r['cpu_idle_cores']:.2f}", "yes" if r["tcp_ok"] else "NO"])
    print(format_table(["fabric", "machines", "switch ports", "ports", "up s", "down s", "daemon MB before",
                        "up", "peak", "daemon MB/port", "machine MB/port", "after", "idle CPU (cores)", "TCP"],
                       rows))
    available = mem_available_bytes()
    for kind, points in lines.items():
        line = fit_line(points)
        if line is None:
            per_port = points[0][1] / points[0][0] / MB
            print(f"{kind}: one size measured: {per_port:.2f} MB of the machine per switch port")
            continue
        fits = [k for k in range(4, 26, 2)  # k = 24: the emulator's largest fat-tree
                if line[0] + line[1] * switch_port_count(fabric("fat_tree", k)) + RESERVE_BYTES <= available]
        print(f"{kind} ports ({caps.ovs_datapath} datapath): the machine's available memory falls "
              f"{line[1] / MB:.2f} MB per switch port (+{line[0] / MB:,.0f} MB); the largest fat-tree in the "
              f"{available / MB:,.0f} MB available: k = {max(fits) if fits else 'none'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
