#!/usr/bin/env python3
"""Cluster mode against one machine: the same replay job on a network built here alone and on the
same network spread over servers (``emulator.cluster``, Mininet's cluster edition).

Prints, per network, build and teardown times, the tunnels, the job's start-up and communication
time, and the cluster's ratios to this machine's. Details: ``docs/benchmarks.md`` (``bench/cluster.py``).

    sudo .venv/bin/python bench/cluster.py [--racks 2] [--hosts 1] [--dilation 3] [--iterations 5] [--model vgg16]
    sudo .venv/bin/python bench/cluster.py --server host2 --ssh-config ~/.ssh/config
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiment.reporting.report import format_table  # noqa: E402


def measure(g, out: str, options, machines: list[str], buckets, iterations: int) -> dict:
    """Build the network, run the ring once, take the network down: times and bytes."""
    from emulator.net import EmulatedNetwork
    from emulator.one_job import OneJob, run_job

    t0 = time.monotonic()
    net = EmulatedNetwork(g, out, options)
    with net:
        up_s = time.monotonic() - t0
        before = net.counters.switch_counters()
        run = run_job(net, out, OneJob("ring", tuple(machines), "ring", buckets, iterations=iterations,
                                        warmup_iterations=1, compute_s=0.05, timeout_s=600))
        time.sleep(0.3)
        moved = net.counters.link_bytes(before, net.counters.switch_counters())
        t1 = time.monotonic()
    return {"up_s": up_s, "down_s": time.monotonic() - t1, "comm_s": run.comm_mean_s(), "startup_s": run.startup_s,
            "bytes": moved}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--racks", type=int, default=2)
    ap.add_argument("--hosts", type=int, default=1, help="machines per rack")
    ap.add_argument("--scale", type=float, default=500.0)
    ap.add_argument("--dilation", type=float, default=3.0)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--model", default="vgg16", help="model whose scaled DDP buckets are replayed")
    ap.add_argument("--server", action="append", default=[], help="another server (as ssh knows it)")
    ap.add_argument("--ssh-config", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/cluster.py: must run as root (Mininet): sudo .venv/bin/python bench/cluster.py", file=sys.stderr)
        return 2

    from common.errors import TestbedError
    from emulator.cluster import ClusterOptions
    from emulator.loopback_server import LoopbackServer
    from emulator.net import NetOptions
    from jobs.models import get_model, scaled_buckets
    from topo import leaf_spine, machines
    from topo.partition import assign_servers, crossing_links

    g = leaf_spine(args.racks, 1, args.hosts)
    hosts = machines(g)
    ring = [hosts[r * args.hosts] for r in range(args.racks)]
    buckets = scaled_buckets(get_model(args.model), args.scale)
    try:
        with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
            servers, ssh_config = args.server, args.ssh_config
            if not servers:
                srv = stack.enter_context(LoopbackServer())
                servers, ssh_config = [srv.address], srv.ssh_config
            cluster = ClusterOptions(("localhost", *servers), ssh_config=ssh_config)
            tunnels = crossing_links(g, assign_servers(g, list(cluster.servers)))
            rows, res = [], {}
            for kind, opts in (("one machine", None), (f"{len(cluster.servers)} servers", cluster)):
                options = NetOptions(scale=args.scale, dilation=args.dilation, cluster=opts)
                print(f"{kind}: building, running the {len(ring)}-machine ring ...", flush=True)
                res[kind] = r = measure(g, os.path.join(tmp, kind.replace(" ", "-")), options, ring, buckets,
                                        args.iterations)
                rows.append([kind, f"{len(tunnels) if opts else 0}", f"{r['up_s']:.1f}", f"{r['down_s']:.1f}",
                             f"{r['startup_s']:.2f}", f"{r['comm_s']:.4f}"])
    except TestbedError as e:
        print(f"bench/cluster.py: {e}", file=sys.stderr)
        return 2
    print(format_table(["network", "tunnels", "up s", "down s", "job start-up s", "comm/iteration s"], rows))
    one, spread = res["one machine"], res[f"{len(cluster.servers)} servers"]
    ratios = [spread["bytes"][k] / b for k, b in one["bytes"].items() if b > 10_000]
    print(f"cluster / one machine: communication time {spread['comm_s'] / one['comm_s']:.3f}; bytes per link "
          f"{min(ratios):.4f}-{max(ratios):.4f} ({len(ratios)} links)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
