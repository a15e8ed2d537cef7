#!/usr/bin/env python3
"""Packet rate of the INA aggregators: bmv2 running ``ina/p4/aggregator.p4``, and the software engine.

Also the end hosts (the PS and the workers on loopback) against them, and with ``--fabric`` one
job on an emulated leaf-spine as a TCP ring, with INA at the leaves and with INA passed
unaggregated to the PS. The workload, what each row measures and why the fabric's dilation is 6:
``docs/benchmarks.md`` (``bench/ina.py``). The veth rows need root; bmv2's a toolchain.

    sudo .venv/bin/python bench/ina.py [--seqs 4000] [--fan-in 4] [--window 64 256]
    sudo .venv/bin/python bench/ina.py --fabric [--model vgg16] [--dilation 6] [--iterations 5]
        [--placements two-racks,one-rack] [--fabric-engine auto|bmv2|software]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from experiment.config.schema import InaConfig  # noqa: E402
from experiment.reporting.report import format_table  # noqa: E402
from ina.aggregator import Aggregator, Dest, JobEntry, Role  # noqa: E402
from ina.p4 import build  # noqa: E402
from ina.protocol import VALUES_PER_PACKET, data_packet  # noqa: E402
from ina.rig import SwitchRig  # noqa: E402
from jobs.collective import collective_of  # noqa: E402

JOB = 7
SLOTS = 4096
DEFAULT_VALUES_PER_PACKET = InaConfig().values_per_packet
END_HOST_TIMEOUT_S = 300.0

_WORKER = """
import json, random, sys, time
from ina.client import InaClient
job, bit, seqs, out, lanes = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
rnd = random.Random(bit)
ints = [rnd.randrange(-1 << 20, 1 << 20) for _ in range(seqs * lanes)]
with InaClient(job, bit, "127.0.0.1", 1.0, bind=f"127.0.0.{bit + 2}", values_per_packet=lanes) as client:
    t0, c0 = time.time(), time.process_time()
    sums = client.allreduce_ints(ints)
    t1, c1 = time.time(), time.process_time()
with open(out, "w") as f:
    json.dump({"start": t0, "end": t1, "cpu": c1 - c0, "sums": sums, "sent": client.stats.sent,
               "resent": client.stats.resent, "timeouts": client.stats.timeouts}, f)
"""


def workload(seqs: int, fan_in: int, lanes: int, seed: int = 1) -> list[bytes]:
    """Every worker's packet of every seq, seq by seq, ``lanes`` values each."""
    rnd = random.Random(seed)
    return [data_packet(JOB, seq, 1 << w, [rnd.randrange(-1 << 20, 1 << 20) for _ in range(lanes)])
            for seq in range(seqs) for w in range(fan_in)]


def run_engine(packets: list[bytes], fan_in: int, lanes: int) -> tuple[list[bytes], float]:
    """The engine's aggregates and its wall seconds."""
    agg = Aggregator(SLOTS, lanes)
    agg.install(JOB, fan_in, Role.LEAF, out_bit=0)
    t0 = time.perf_counter()
    outs = [o for p in packets for o in agg.process(p)]
    return [o.data for o in outs if o.dest is not Dest.DROP], time.perf_counter() - t0


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def end_hosts(seqs: int, fan_in: int, lanes: int) -> dict:
    """The PS and ``fan_in`` workers on loopback (``docs/benchmarks.md``): wall seconds from the first worker's
    start to the last one's end, whether every worker got the exact sums, the resends, and the CPU
    seconds of the PS (from its start of service to the last worker's end) and of the busiest worker
    (its allreduce)."""
    import json
    import subprocess

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": repo}
    with tempfile.TemporaryDirectory(prefix="ina-hosts-") as tmp:
        cfg, ack = os.path.join(tmp, "ps.json"), os.path.join(tmp, "ack.json")
        with open(cfg, "w") as f:
            json.dump({"jobs": [{"job_id": JOB, "root_workers": list(range(fan_in)), "leaves": [],
                                 "workers": {str(b): f"127.0.0.{b + 2}" for b in range(fan_in)}}]}, f)
        ps = subprocess.Popen([sys.executable, "-m", "ina.ps", "--config", cfg, "--bind", "127.0.0.1", "--ack", ack,
                               "--values-per-packet", str(lanes)], env=env, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not os.path.exists(ack):
                if ps.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the PS did not start: {ps.stderr.read() if ps.poll() is not None else ''}")
                time.sleep(0.02)
            ps_cpu = cpu_seconds(ps.pid)
            outs = [os.path.join(tmp, f"w{b}.json") for b in range(fan_in)]
            argv = [sys.executable, "-c", _WORKER, str(JOB)]
            workers = [subprocess.Popen([*argv, str(b), str(seqs), outs[b], str(lanes)], env=env,
                                        stderr=subprocess.PIPE, text=True) for b in range(fan_in)]
            for w in workers:
                if w.wait(timeout=END_HOST_TIMEOUT_S) != 0:
                    raise RuntimeError(f"a worker failed: {w.stderr.read().strip()}")
            ps_cpu = cpu_seconds(ps.pid) - ps_cpu
        finally:
            ps.terminate()
            ps.wait(timeout=30)
        results = []
        for path in outs:
            with open(path) as f:
                results.append(json.load(f))
    rnds = [random.Random(b) for b in range(fan_in)]
    per_worker = [[r.randrange(-1 << 20, 1 << 20) for _ in range(seqs * lanes)] for r in rnds]
    want = [sum(col) for col in zip(*per_worker, strict=True)]
    return {"seconds": max(r["end"] for r in results) - min(r["start"] for r in results),
            "exact": all(r["sums"] == want for r in results),
            "resent": sum(r["resent"] for r in results), "timeouts": sum(r["timeouts"] for r in results),
            "ps_cpu": ps_cpu, "worker_cpu": max(r["cpu"] for r in results)}


PLACEMENTS = (("two racks", ("h1", "h2", "h5", "h6")), ("one rack", ("h1", "h2", "h3", "h4")))
"""The fabric job's workers: two under l1 and two under l2, or all four under l1 (a rack-local job,
whose one uplink INA relieves most)."""
def placements(names: str) -> list[tuple[str, tuple[str, ...]]]:
    """The :data:`PLACEMENTS` named in ``names`` (comma-separated, a dash for each space), in that order."""
    by_name = {where.replace(" ", "-"): (where, workers) for where, workers in PLACEMENTS}
    unknown = [n for n in names.split(",") if n not in by_name]
    if unknown:
        raise SystemExit(f"--placements: unknown {', '.join(unknown)}; known: {', '.join(by_name)}")
    return [by_name[n] for n in names.split(",")]


WAYS = (("ring allreduce (TCP)", "ring", None, None),
        ("INA, results unicast", "ina", ("l1", "l2", "l3"), "unicast"),
        ("INA, results multicast", "ina", ("l1", "l2", "l3"), "multicast"),
        ("INA protocol, unaggregated (PS only)", "ina", (), "unicast"))
"""Each way of running the job: name, collective, the switches that aggregate, how results come back."""


def simulated_comm_s(g, rates, workers, collective, buckets, ps, switches, results, lanes) -> float:
    """The simulator's estimate of the job's communication time per iteration (its fluid engine,
    frames' headers counted, the same PAT-free aggregators and results mode)."""
    from sim.flowsim import SimJob, SimOptions
    from sim.fluid import FluidEngine
    from sim.ina import InaSpec

    engine = FluidEngine(g, rates, SimOptions(mtu=1500, ina_results=results or "unicast",
                                              ina_values_per_packet=lanes))
    ina = InaSpec(ps, tuple(switches)) if collective_of(collective).aggregates_in_fabric else None
    engine.add(SimJob("job", tuple(workers), collective, buckets, 0.05, 3, ina=ina))
    (run,) = engine.advance(float("inf"))
    return run.estimate.comm_mean_s


def _client_line(clients: list[dict]) -> str:
    """The INA workers' counters of one run, summed: results, of which ECN-marked, and resends
    (timeouts and RACK's), with the resends found spurious; '-' for a job without INA."""
    if not clients:
        return "-"
    total = {k: sum(c[k] for c in clients) for k in ("results", "ecn_results", "timeouts", "fast_resends",
                                                       "spurious_timeouts", "spurious_fast_resends")}
    return (f"{total['results']} / {total['ecn_results']} ECN / {total['timeouts']}+{total['fast_resends']} resent "
            f"({total['spurious_timeouts'] + total['spurious_fast_resends']} spurious)")


def run_options(g, scale: float, dilation: float, ina_switches: tuple[str, ...]):
    """The network an experiment with the default settings would build here (its ECN marker and
    switch port kind chosen as a run chooses them, :class:`emulator.runner.EmulatorExperiment`),
    at ``scale`` and ``dilation``, with aggregator ports on ``ina_switches``."""
    import dataclasses

    from emulator.runner import EmulatorExperiment, net_options
    from experiment.config.schema import load

    cfg = dataclasses.replace(load(os.path.join(ROOT, "experiments", "default.yaml")), scale=scale, dilation=dilation)
    experiment = EmulatorExperiment()
    experiment.prepare(cfg, g, print)
    return net_options(cfg, experiment.marker, experiment.ports, ina_switches)


def fabric_rows(args) -> list[list[str]]:
    """One row per placement and way of running the job (see ``docs/benchmarks.md``) on one network."""
    import json

    from emulator.cpu import CpuSampler
    from emulator.ina_fabric import InaFabric, endpoints
    from emulator.net import EmulatedNetwork
    from emulator.one_job import OneJob, run_job
    from ina.plan import plan_job
    from jobs.models import get_model, scaled_buckets
    from measure.fidelity import JobEvidence, job_verdicts
    from measure.shaping import link_rates_mbps
    from topo import leaf_spine
    from workers.launcher import ina_counters_path

    g = leaf_spine(3, 1, 4, oversubscription=2)
    ps = "h9"
    rates = link_rates_mbps(g, args.scale)
    lanes = args.fabric_values_per_packet
    buckets = tuple(scaled_buckets(get_model(args.model), args.scale))
    print(f"fabric: leaf-spine 3 x 4 machines, 2:1, 10 Gbit/s / {args.scale:g}, dilation {args.dilation:g}; "
          f"{args.model} buckets: {len(buckets)}, {sum(buckets) / 1e6:.2f} MB per iteration (scaled); INA packets of "
          f"{lanes} values", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ina-bench-") as tmp:
        opts = run_options(g, args.scale, args.dilation, ("l1", "l2", "l3"))
        print(f"  switch ports {opts.switch_ports.name}, ECN {opts.ecn.name} (as an experiment's defaults choose here)",
              flush=True)
        with EmulatedNetwork(g, tmp, opts) as net, \
                InaFabric(net, args.fabric_engine, values_per_packet=lanes) as fabric:
            for where, workers in placements(args.placements):
                first = len(rows)
                for name, collective, ina_switches, results in WAYS:
                    plan = started = None
                    if collective_of(collective).aggregates_in_fabric:
                        plan = plan_job(g, len(rows) + 1, workers, ps, ina_switches, results, lanes)
                        fabric.install([plan], 4096)
                        started = fabric.start_ps([plan], os.path.join(tmp, f"ps{len(rows)}"))
                    before = net.counters.switch_counters()
                    sampler = CpuSampler(0.25, watch=fabric.processes)
                    sampler.start()
                    job = f"job{len(rows)}"
                    try:
                        run = run_job(net, tmp, OneJob(
                            job, tuple(workers), collective, buckets, iterations=args.iterations,
                            compute_s=0.05, timeout_s=1800, ina_endpoints=endpoints(net, plan) if plan else None))
                    finally:
                        sampler.stop()
                        if started:
                            fabric.stop_ps(started)
                    cpu, busiest = sampler.summary(), max(sampler.process_p95().items(), key=lambda kv: kv[1],
                                                          default=None)
                    links = net.counters.link_bytes(before, net.counters.switch_counters())
                    stats = fabric.stats()
                    aggregates = sum(st.aggregates for st in stats.values()) if plan else None
                    up = links[("l1", "s1")] + links[("l2", "s1")]
                    switches = tuple(plan.entries) if plan else ()
                    evidence = JobEvidence(name, 0, tuple(workers), collective, buckets, run.comm_mean_s(), True,
                                           ps_host=ps if plan else None, ina_switches=switches,
                                           ina_results=results or "unicast", ina_values_per_packet=lanes)
                    (verdict,) = job_verdicts(g, rates, [evidence], 1500)
                    sim_s = simulated_comm_s(g, rates, workers, collective, buckets, ps, switches, results, lanes)
                    clients = []
                    for m in workers if plan else ():
                        with open(ina_counters_path(tmp, m)) as f:
                            clients.append(json.load(f)[job])
                    rows.append([where, name, f"{run.comm_mean_s():.3f}", f"{up / 1e6:.2f}",
                                 "-" if aggregates is None else str(aggregates),
                                 f"{links[('l3', ps)] / 1e6:.2f} / {links[(ps, 'l3')] / 1e6:.2f}",
                                 f"{verdict.bound_s:.3f}", f"{verdict.ratio:.2f} {verdict.status}", f"{sim_s:.3f}",
                                 f"{cpu.p95 or 0:.0%} / {cpu.switch_thread_p95 or 0:.0%}"
                                 + (f" / {busiest[0]} {busiest[1]:.0%}" if busiest else ""),
                                 _client_line(clients)])
                    print(f"  {where}, {name}: {rows[-1][2]} s per iteration, {rows[-1][3]} MB up the workers' "
                          f"uplinks", flush=True)
                ring_s, ring_up = float(rows[first][2]), float(rows[first][3])
                for r in rows[first:]:
                    r.insert(3, f"{float(r[2]) / ring_s:.2f}")
                    r.insert(5, f"{float(r[4]) / ring_up:.2f}" if ring_up else "-")
            engine = fabric.engine
    print(f"(INA engine: {engine})")
    return rows


def packet_rates(args, lanes: int, tc, why: str | None) -> tuple[list[list[str]], bool]:
    """One row per aggregator and window at ``lanes`` values per packet (the workload of
    ``docs/benchmarks.md``, ``args.seqs`` values per worker cut into packets of ``lanes``), and whether every
    aggregator emitted the engine's aggregates."""
    seqs = max(1, args.seqs * VALUES_PER_PACKET // lanes)
    packets = workload(seqs, args.fan_in, lanes)
    want, engine_s = run_engine(packets, args.fan_in, lanes)
    assert len(want) == seqs, f"engine emitted {len(want)} aggregates for {seqs} seqs"
    engine_rate = len(packets) / engine_s

    def row(name: str, window: str, seconds: float, same: bool) -> list[str]:
        rate = len(packets) / seconds
        return [str(lanes), name, window, f"{len(packets)}", f"{seconds:.2f}", f"{rate:,.0f}",
                f"{rate * lanes / 1e6:.2f}", f"{rate / engine_rate:.2f}", "yes" if same else "NO"]

    rows = [row("software engine (ina.aggregator, in process)", "-", engine_s, True)]
    for engine in ("software", "bmv2"):
        if os.geteuid() != 0 or (engine == "bmv2" and why):
            continue
        program = build.compile_program(tc, lanes=lanes) if engine == "bmv2" else None
        with tempfile.TemporaryDirectory() as tmp, \
                SwitchRig(1, tmp, engine, tc, program, values_per_packet=lanes) as rig:
            for window in args.window:
                rig.configure(0, SLOTS, {JOB: JobEntry(args.fan_in, Role.LEAF, 0)})
                out, seconds = rig.blast(0, packets, window)
                same = [data for dest, data in out if dest == "to_ps"] == want and len(out) == len(want)
                name = f"bmv2 simple_switch ({tc.origin})" if engine == "bmv2" else "software aggregator process"
                rows.append(row(f"{name}, on veths", str(window), seconds, same))
    return rows, all(r[-1] == "yes" for r in rows)


def _count(x: float) -> str:
    """A rate with thousands separators; '-' where it was not measured (NaN)."""
    return "-" if math.isnan(x) else f"{x:,.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seqs", type=int, default=4000, help=f"seqs per worker at {VALUES_PER_PACKET} values per packet "
                    "(the same values at any other count)")
    ap.add_argument("--fan-in", type=int, default=4)
    ap.add_argument("--window", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--values-per-packet", type=int, nargs="+", default=[32, 64, 128, 256],
                    help="values per packet to measure the aggregators and end hosts at")
    ap.add_argument("--fabric", action="store_true", help="also one job with and without INA on an emulated fabric")
    ap.add_argument("--fabric-values-per-packet", type=int, default=DEFAULT_VALUES_PER_PACKET,
                    help="the fabric job's values per packet (default: the config's)")
    ap.add_argument("--model", default="vgg16")
    ap.add_argument("--scale", type=float, default=500.0)
    ap.add_argument("--dilation", type=float, default=6.0)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--fabric-engine", choices=("auto", "bmv2", "software"), default="auto",
                    help="the fabric's aggregators (auto: bmv2 where it runs here, else the software engine)")
    ap.add_argument("--placements", default=",".join(w.replace(" ", "-") for w, _ in PLACEMENTS),
                    help="where the fabric job's four workers are (default: %(default)s)")
    args = ap.parse_args()
    placements(args.placements)
    if os.geteuid() != 0:
        print("the aggregators on veths not measured: needs root")
    tc, why = build.find_toolchain()
    why = why if tc is None else build.runs(tc)
    if why:
        print(f"bmv2 not measured: {why}")
    rows, hosts_rows, ratios, ok = [], [], [], True
    for lanes in args.values_per_packet:
        lane_rows, same = packet_rates(args, lanes, tc, why)
        rows += lane_rows
        seqs = args.seqs
        hosts = end_hosts(seqs, args.fan_in, lanes)
        ok = ok and same and hosts["exact"]
        n_in = seqs * args.fan_in
        hosts_rate = n_in / hosts["seconds"]
        # Each end host's capacity on one core of its own: the PS's packets in per CPU second, a
        # worker's seqs per CPU second times the fan-in (the job's packets it feeds an aggregator).
        # A run shorter than the kernel's CPU accounting tick (the PS's /proc figures) shows no capacity.
        ps_core = n_in / hosts["ps_cpu"] if hosts["ps_cpu"] > 0 else math.nan
        worker_core = n_in / hosts["worker_cpu"] if hosts["worker_cpu"] > 0 else math.nan
        slowest = math.nan if math.isnan(ps_core) or math.isnan(worker_core) else min(ps_core, worker_core)
        hosts_rows.append([str(lanes), f"{seqs} x {args.fan_in}", f"{hosts['seconds']:.2f}", f"{hosts_rate:,.0f}",
                           f"{hosts_rate * lanes / 1e6:.2f}", _count(ps_core), _count(worker_core / args.fan_in),
                           "yes" if hosts["exact"] else "NO", str(hosts["resent"])])
        # The job's packets per second through the end hosts (every worker's packet into the PS), all
        # sharing this machine's cores, and the slowest end host's on a core of its own, against each
        # aggregator's: below 1, the end hosts cannot feed that aggregator.
        for r in lane_rows:
            rate = float(r[5].replace(",", ""))
            ratios.append([str(lanes), r[1], r[2], f"{hosts_rate / rate:.2f}",
                           "-" if math.isnan(slowest) else f"{slowest / rate:.2f}"])
        print(f"  {lanes} values per packet measured", flush=True)
    print(f"INA aggregator packet rate: one job, fan-in {args.fan_in}, {args.seqs * VALUES_PER_PACKET} values "
          f"per worker")
    print(format_table(["values/packet", "aggregator", "window", "packets", "wall s", "packets/s", "M values/s",
                        "vs engine", "same aggregates"], rows))
    print(f"INA end hosts on loopback: {args.fan_in} workers (ina.client) and the PS (ina.ps), no switch, the PS "
          f"summing every worker's packet")
    print(format_table(["values/packet", "seqs x workers", "wall s", "packets/s into the PS", "M values/s",
                        "PS packets / CPU s", "worker seqs / CPU s", "sums exact", "resends"], hosts_rows))
    print(format_table(["values/packet", "aggregator", "window", "end hosts together / aggregator",
                        "slowest end host per core / aggregator"], ratios))
    if args.fabric and os.geteuid() == 0:
        print(format_table(["4 workers in", "run", "comm s / iteration", "vs ring", "MB up the workers' uplinks",
                            "vs ring", "aggregates", "MB into / out of h9", "bound s", "vs bound, verdict",
                            "simulator s", "CPU p95: machine / switch thread / busiest INA process",
                            "INA results / marked / resent"], fabric_rows(args)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
