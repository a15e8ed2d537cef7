"""ECN marker and emulation-capacity benchmark (needs root; runs real networks).

Prints four tables: the BPF marker's overhead, marks versus the threshold K, the emulation
capacity the fidelity monitor does not flag, and kernel RED beside the BPF marker. What each
measures and the options: ``docs/benchmarks.md`` (``bench/ecn.py``); figures: ``docs/ecn.md``.

    sudo .venv/bin/python bench/ecn.py [--seconds 5] [--skip overhead,k,capacity,red] [--rate 20] [--switch-ports afxdp]
        [--repeats 2] [--thresholds-kb 3,15,30,60,120] [--rates 2.5,5,10,20,40,80] [--mtus 1500,9000]
        [--fabric fat_tree|leaf_spine]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from emulator.capabilities import qdisc_probe  # noqa: E402
from emulator.cpu import CpuSampler  # noqa: E402
from emulator.ecn import build  # noqa: E402
from emulator.net import EmulatedNetwork, NetOptions  # noqa: E402
from emulator.queues import PortSampler, parse_tc_qdiscs  # noqa: E402
from emulator.variants import ecn_marker, switch_ports  # noqa: E402
from experiment.reporting.report import format_table  # noqa: E402
from measure.fidelity import assess, link_checks  # noqa: E402
from measure.linkstats import read_queue_samples  # noqa: E402
from measure.marking import marking_params  # noqa: E402
from measure.ports import AFXDP_MAX_MTU  # noqa: E402
from topo import fat_tree, leaf_spine  # noqa: E402

PAPER_BW_MBPS = 10000.0
QUEUE_PACKETS = 100


SWITCH_PORTS = "system"  # --switch-ports


@dataclasses.dataclass(frozen=True)
class Layout:
    """A fabric and where each part's traffic runs on it."""

    what: str
    build: object  # () -> the fabric's graph
    overhead: tuple[str, str]  # part 1's flow
    hops: int  # switches on it
    incast: tuple[tuple[str, str], ...]  # parts 2 and 4: two senders into one machine
    bottleneck: tuple[str, str]  # (switch, machine): the port they share
    cross: tuple[tuple[str, str], ...]  # part 3's flows, every one crossing the fabric's top
    cross_what: str

    def incast_text(self) -> str:
        """``"h1, h5 -> h4"``: the incast's senders and receiver."""
        return f"{', '.join(s for s, _ in self.incast)} -> {self.incast[0][1]}"


LAYOUTS = {
    "fat_tree": Layout("a k=4 fat-tree", lambda: fat_tree(4), ("h1", "h16"), 5, (("h1", "h4"), ("h5", "h4")),
                       ("e2", "h4"), (("h1", "h9"), ("h2", "h13"), ("h3", "h10"), ("h4", "h14"), ("h5", "h11"),
                                      ("h6", "h15"), ("h7", "h12"), ("h8", "h16")), "8 cross-pod flows"),
    # Uplinks at a machine's rate (2:1), so that none is beyond the shaper at part 1's 1000 Mbit/s.
    "leaf_spine": Layout("a leaf-spine of 2 racks x 2 machines, 1 spine, 2:1",
                         lambda: leaf_spine(2, 1, 2, oversubscription=2), ("h1", "h4"), 3,
                         (("h1", "h2"), ("h3", "h2")), ("l1", "h2"), (("h1", "h3"), ("h2", "h4")),
                         "2 cross-rack flows"),
}
"""--fabric."""


def options(rate_mbps: float, ecn: bool, threshold_bytes: float = 30000, mtu: int = 1500) -> NetOptions:
    """Network options for links at ``rate_mbps`` (10 Gbit/s paper links scaled down)."""
    def marking(rate):
        return marking_params(threshold_bytes, 0, 0, 1.0, rate, QUEUE_PACKETS, mtu)

    return NetOptions(scale=PAPER_BW_MBPS / rate_mbps, mtu=mtu, queue_packets=QUEUE_PACKETS,
                      ecn=ecn_marker("bpf" if ecn else "none"), marking=marking if ecn else None,
                      switch_ports=switch_ports(SWITCH_PORTS if mtu <= AFXDP_MAX_MTU else "system"))


LISTEN_TIMEOUT_S = 30.0


def wait_listening(net, machine: str, port: int) -> None:
    """Return once a TCP socket listens on ``port`` in ``machine``'s namespace (``ss``), so that no
    client connects before its server; raise naming both after :data:`LISTEN_TIMEOUT_S`."""
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    while not net.host_exec(machine, f"ss -Hltn sport = :{port}").strip():
        if time.monotonic() > deadline:
            raise RuntimeError(f"iperf3 server on {machine}:{port} not listening after {LISTEN_TIMEOUT_S:g} s")
        time.sleep(0.05)


def iperf(net, pairs, seconds: float, tag: str) -> list[float]:
    """Run iperf3 for every (src, dst) pair at once; goodput of each, Mbit/s."""
    servers = [net.popen(d, ["iperf3", "-s", "-1", "-p", str(5400 + i)]) for i, (_, d) in enumerate(pairs)]
    for i, (_, d) in enumerate(pairs):
        wait_listening(net, d, 5400 + i)
    logs = [os.path.join(net.run_dir, f"{tag}-{i}.json") for i in range(len(pairs))]
    clients = [net.popen(s, ["iperf3", "-c", net.g.nodes[d]["ip"], "-p", str(5400 + i), "-t", str(seconds), "-J"],
                         log_path=logs[i]) for i, (s, d) in enumerate(pairs)]
    for p in clients + servers:
        p.wait(timeout=seconds + 60)
        net.forget(p)
    out = []
    for path in logs:
        with open(path) as f:
            out.append(json.load(f)["end"]["sum_received"]["bits_per_second"] / 1e6)
    return out


def bench_overhead(tmp: str, seconds: float, repeats: int = 2, layout: Layout = LAYOUTS["fat_tree"]) -> None:
    rows = []
    results, marks = {False: [], True: []}, 0
    for rep in range(repeats):
        for ecn in (False, True):
            with EmulatedNetwork(layout.build(), os.path.join(tmp, f"ovh-{rep}-{ecn}"), options(1000.0, ecn)) as net:
                results[ecn].append(iperf(net, [layout.overhead], seconds, "ovh")[0])
                if ecn:
                    marks += sum(c["marks"] for c in net.marker.port_counters().values())
    base, marked = (sum(v) / len(v) for v in (results[False], results[True]))
    rows.append(["without marker", " / ".join(f"{x:.0f}" for x in results[False]), f"{base:.0f}", "1.00", "-"])
    rows.append(["with marker", " / ".join(f"{x:.0f}" for x in results[True]), f"{marked:.0f}", f"{marked / base:.2f}",
                 str(marks)])
    src, dst = layout.overhead
    print(f"\n1. Marker overhead: one TCP flow {src} -> {dst} ({layout.hops} switches), links 1000 Mbit/s")
    print(format_table(["", "runs Mbit/s", "mean Mbit/s", "ratio", "marks"], rows))


THRESHOLDS_KB = (3, 15, 30, 60, 120)  # --thresholds-kb
CAPACITY_RATES = (2.5, 5.0, 10.0, 20.0, 40.0, 80.0)  # --rates
CAPACITY_MTUS = (1500, 9000)  # --mtus


def bench_thresholds(tmp: str, seconds: float, thresholds_kb=THRESHOLDS_KB,
                     layout: Layout = LAYOUTS["fat_tree"]) -> None:
    rate = 20.0
    rows = []
    with EmulatedNetwork(layout.build(), os.path.join(tmp, "k"), options(rate, True)) as net:
        port = net.switch_intfs[layout.bottleneck]
        for k in (round(kb * 1000) for kb in thresholds_kb):
            net.marker.configure({port: (rate, marking_params(k, 0, 0, 1.0, rate, QUEUE_PACKETS, 1500))}, reset=True)
            goodput = sum(iperf(net, list(layout.incast), seconds, f"k{k}"))
            c = net.marker.port_counters()[port]
            rows.append([f"{k / 1000:g}", str(c["marks"]), f"{1000 * c['marks'] / max(1, c['pkts']):.1f}",
                         f"{c['max_backlog_ns'] / 1e6:.1f}", str(c["vq_drops"]), f"{goodput:.1f}"])
    print(f"\n2. Marks versus K: {layout.incast_text()} for {seconds:g} s, bottleneck {' -> '.join(layout.bottleneck)} "
          f"at {rate:g} Mbit/s, FIFO {QUEUE_PACKETS} packets")
    print(format_table(["K kB", "marks", "marks/1000 pkts", "max queue ms", "FIFO-full pkts", "goodput Mbit/s"],
                       rows))


def bench_capacity(tmp: str, seconds: float, rates=CAPACITY_RATES, mtus=CAPACITY_MTUS,
                   layout: Layout = LAYOUTS["fat_tree"]) -> None:
    rows, capacity = [], {}
    for mtu in mtus:
        capacity[mtu] = 0.0
        for rate in rates:
            run_dir = os.path.join(tmp, f"cap-{mtu}-{rate:g}")
            with EmulatedNetwork(layout.build(), run_dir, options(rate, True, mtu=mtu)) as net:
                cpu = CpuSampler(0.25)
                ports = PortSampler(os.path.join(run_dir, "q.jsonl"), net.counters.port_links(), net.marker, 0.25)
                before = net.counters.switch_counters()
                t0 = time.time()
                cpu.start()
                ports.start()
                goodput = sum(iperf(net, list(layout.cross), seconds, "cap"))
                cpu.stop()
                ports.stop()
                elapsed = time.time() - t0
                after = net.counters.switch_counters()
            switched = sum(after[k][0] - before[k][0] for k in after) * 8 / elapsed / 1e6
            window = [(t0 + 1.0, t0 + 0.5 + seconds)]
            verdict = assess(cpu.summary(window), link_checks(read_queue_samples(os.path.join(run_dir, "q.jsonl")),
                                                              net.rates, window, mtu))
            c = cpu.summary(window)
            rows.append([str(mtu), f"{rate:g}", f"{goodput:.0f}", f"{switched:.0f}", f"{c.p95:.0%}",
                         f"{c.switch_thread_p95:.0%}" if c.switch_thread_p95 is not None else "-",
                         "ok" if verdict.trustworthy else "FLAGGED"])
            if not verdict.trustworthy:
                break
            capacity[mtu] = max(capacity[mtu], switched)
    print(f"\n3. Emulation capacity: {layout.cross_what} on {layout.what} for {seconds:g} s")
    print(format_table(["MTU", "link Mbit/s", "goodput Mbit/s", "switched Mbit/s", "cpu p95", "switch thread p95",
                        "fidelity"], rows))
    for mtu, cap in capacity.items():
        print(f"capacity with MTU {mtu}: {cap:.0f} Mbit/s of aggregate switch throughput before the monitor flags")
    if capacity.get(1500, 0) > 0 and 9000 in capacity:
        print(f"jumbo frames: {capacity[9000] / capacity[1500]:.2f}x the capacity of MTU 1500")


def port_qdisc(port: str) -> dict:
    """The counters of one port's FIFO under its shaper (``tc -s qdisc show dev``, which names no device)."""
    cp = subprocess.run(["tc", "-s", "-j", "qdisc", "show", "dev", port], capture_output=True, text=True)
    return parse_tc_qdiscs(cp.stdout, dev=port).get(port, {})


def sample_port(net, port: str, stop: threading.Event, interval_s: float = 0.005) -> list[dict]:
    """The real FIFO (``tc``) and, with the BPF marker, the virtual queue of one port until ``stop``."""
    rows = []
    while not stop.is_set():
        row = {"t": time.time(), **port_qdisc(port)}
        if net.marker is not None:
            row["vq_backlog_ns"] = net.marker.port_counters()[port]["backlog_ns"]
        rows.append(row)
        stop.wait(interval_s)
    return rows


def _quantiles(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{statistics.median(ordered) / 1000:.1f} / {ordered[int(0.9 * (len(ordered) - 1))] / 1000:.1f}"


def bench_red_beside_bpf(tmp: str, seconds: float, rate: float = 20.0, layout: Layout = LAYOUTS["fat_tree"]) -> None:
    k = 30000
    params = marking_params(k, 0, 0, 1.0, rate, QUEUE_PACKETS, 1500)
    bucket = params.burst_bytes
    methods = ["red", "bpf"] if qdisc_probe().get("red") else ["bpf"]
    rows, per_kpkt = [], {}
    for method in methods:
        opts = NetOptions(scale=PAPER_BW_MBPS / rate, queue_packets=QUEUE_PACKETS, ecn=ecn_marker(method),
                          marking=lambda r: marking_params(k, 0, 0, 1.0, r, QUEUE_PACKETS, 1500),
                          switch_ports=switch_ports(SWITCH_PORTS))
        with EmulatedNetwork(layout.build(), os.path.join(tmp, f"red-{method}"), opts) as net:
            port = net.switch_intfs[layout.bottleneck]
            before = port_qdisc(port)
            marks0 = net.marker.port_counters()[port]["marks"] if net.marker is not None else before["red_marked"]
            stop = threading.Event()
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                sampled = pool.submit(sample_port, net, port, stop)
                goodput = sum(iperf(net, list(layout.incast), seconds, f"red-{method}"))
                stop.set()
                samples = sampled.result()
            after = samples[-1]
            marks1 = net.marker.port_counters()[port]["marks"] if net.marker is not None else after["red_marked"]
        # the traffic's samples: from the first to the last with a queue
        busy = [i for i, r in enumerate(samples) if r.get("backlog_bytes")]
        window = samples[busy[0]:busy[-1] + 1] if busy else []
        real = [r["backlog_bytes"] for r in window]
        virtual = [max(0.0, r["vq_backlog_ns"] * rate / 8e3 - bucket) for r in window if "vq_backlog_ns" in r]
        pkts = after["sent_pkts"] - before["sent_pkts"]
        # the port's own rate while it had a queue: what it sent over the sampled window, against its rate
        sent = window[-1]["sent_bytes"] - window[0]["sent_bytes"] if len(window) > 1 else 0
        port_rate = sent * 8 / 1e6 / (window[-1]["t"] - window[0]["t"]) if len(window) > 1 else 0.0
        per_kpkt[method] = 1000 * (marks1 - marks0) / max(1, pkts)
        interval = (window[-1]["t"] - window[0]["t"]) / max(1, len(window) - 1) if len(window) > 1 else 0.0
        rows.append([method, f"{goodput:.1f}", f"{port_rate / rate:.2f}", str(pkts), str(marks1 - marks0),
                     f"{per_kpkt[method]:.1f}",
                     f"{len(window)} ({1000 * interval:.0f} ms)", _quantiles(real),
                     f"{sum(q > k for q in real) / max(1, len(real)):.0%}", _quantiles(virtual),
                     f"{sum(q > k for q in virtual) / max(1, len(virtual)):.0%}" if virtual else "-"])
    print(f"\n4. Kernel RED beside the BPF marker: {layout.incast_text()} for {seconds:g} s, bottleneck "
          f"{' -> '.join(layout.bottleneck)} at "
          f"{rate:g} Mbit/s, K = {k / 1000:g} kB, FIFO {QUEUE_PACKETS} packets, switch ports {SWITCH_PORTS}")
    print(format_table(["marker", "goodput Mbit/s", "port rate / its rate", "port pkts", "marks", "marks/1000 pkts",
                        "samples (every)",
                        "real queue kB median / p90", "real > K", "virtual queue kB median / p90", "virtual > K"],
                       rows))
    if "red" in per_kpkt:
        print(f"BPF / RED marks per 1000 packets: {per_kpkt['bpf'] / max(per_kpkt['red'], 1e-9):.2f}")
    else:
        print("RED: the kernel has no sch_red (RED qdisc); run in the VM (docs/vm.md) for both markers")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="traffic time per measurement")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: overhead, k, capacity, red")
    ap.add_argument("--rate", type=float, default=20.0,
                    help="part 4's bottleneck rate, Mbit/s (a slower machine keeps a port at its rate only at a lower "
                         "one, as a run's dilation makes it)")
    ap.add_argument("--switch-ports", choices=("system", "afxdp"), default="system",
                    help="switch port type (afxdp only where the MTU allows it; MTU 9000 uses system)")
    ap.add_argument("--repeats", type=int, default=2, help="part 1's runs without and with the marker, each")
    ap.add_argument("--thresholds-kb", default=",".join(f"{k:g}" for k in THRESHOLDS_KB),
                    help="part 2's marking thresholds K, kB (default: %(default)s)")
    ap.add_argument("--rates", default=",".join(f"{r:g}" for r in CAPACITY_RATES),
                    help="part 3's link rates, Mbit/s, rising (default: %(default)s)")
    ap.add_argument("--mtus", default=",".join(map(str, CAPACITY_MTUS)), help="part 3's MTUs (default: %(default)s)")
    ap.add_argument("--fabric", choices=tuple(LAYOUTS), default="fat_tree",
                    help="the k=4 fat-tree, or a leaf-spine of 2 racks x 2 machines (default: %(default)s)")
    args = ap.parse_args()
    global SWITCH_PORTS
    SWITCH_PORTS = args.switch_ports
    if os.geteuid() != 0:
        print("bench/ecn.py: needs root (Mininet, Open vSwitch, tc, BPF)", file=sys.stderr)
        return 2
    build()
    skip = set(filter(None, args.skip.split(",")))
    with tempfile.TemporaryDirectory(prefix="bench-ecn-") as tmp:
        layout = LAYOUTS[args.fabric]
        if "overhead" not in skip:
            bench_overhead(tmp, args.seconds, args.repeats, layout)
        if "k" not in skip:
            bench_thresholds(tmp, args.seconds, [float(x) for x in args.thresholds_kb.split(",")], layout)
        if "capacity" not in skip:
            bench_capacity(tmp, args.seconds, [float(x) for x in args.rates.split(",")],
                           [int(x) for x in args.mtus.split(",")], layout)
        if "red" not in skip:
            bench_red_beside_bpf(tmp, args.seconds, args.rate, layout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
