"""NetPack's figures about its system rather than its gains (NetPack paper §6.1-6.2): its simulator
set against its testbed (Fig. 6) and the time its placement takes (Fig. 10).

Fig. 6 runs the copy of the paper's testbed rack (``experiments/netpack_testbed.yaml``) over Fig. 11's
ToR PATs on the emulator and on the simulator, and regresses the emulated runs' normalised average JCT
on the simulated ones'. Fig. 10 replays the first 4,000 Philly jobs on clusters of the paper's
simulated shape and times NetPack's ``place`` calls alone (``bench/netpack_scale.py`` prints the same).
"""

from __future__ import annotations

import dataclasses
import heapq
import os
import statistics
import time
from collections.abc import Sequence

from reproduce.base import Context, Figure, Outcome, Reproduction, number_text
from reproduce.netpack import CONFIG_TESTBED, PAPER_BASELINES, NetPackFig11
from reproduce.plot import Panel, PaperMark, Series, draw

FIG6_SOURCE = "Fig. 6, §6.1"
FIG6_R = "correlation coefficient r of the testbed's normalised JCT with the simulator's"


@dataclasses.dataclass(frozen=True)
class Regression:
    """A least-squares line ``y = slope * x + intercept`` through paired figures, and how well it fits.

    Attributes:
        points: the (x, y) pairs it was fitted on.
        r: Pearson's correlation coefficient of x and y.
        slope, intercept: the fitted line.
    """

    points: tuple[tuple[float, float], ...]
    r: float
    slope: float
    intercept: float

    @property
    def r_squared(self) -> float:
        """The coefficient of determination of the line, r squared."""
        return self.r * self.r


def regression(points: Sequence[tuple[float, float]]) -> Regression | None:
    """The least-squares line through ``points`` and their correlation; None with fewer than three
    points or where x or y does not vary (no line is determined)."""
    points = tuple(points)
    xs, ys = [x for x, _ in points], [y for _, y in points]
    if len(points) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    fit = statistics.linear_regression(xs, ys)
    return Regression(points, statistics.correlation(xs, ys), fit.slope, fit.intercept)


def paired(measured_rows, simulated_rows, field: str = "jct_norm",
           policies: Sequence[str] = PAPER_BASELINES) -> list[tuple[float, float]]:
    """(simulated, measured) ``field`` of every sweep row the two sweeps share: the same swept value,
    seed and policy among ``policies``, with the figure on both sides."""
    simulated = {(r.value, r.seed, r.policy): getattr(r, field) for r in simulated_rows}
    return [(simulated[key], getattr(r, field)) for r in measured_rows
            if r.policy in policies and getattr(r, field) is not None
            and simulated.get(key := (r.value, r.seed, r.policy)) is not None]


class NetPackFig6(Reproduction):
    name = "netpack-fig6"
    paper = "NetPack"
    source = FIG6_SOURCE
    claim = ("the testbed's average JCT is highly correlated with the simulator's estimate, in a linear way: "
             "a linear regression gives a correlation coefficient of 98%")
    setup = ("the same job traces on its testbed (one Tofino rack of 5 servers with 2 GPUs, 100 Gbit/s, ATP's INA) "
             "and in its simulator with the same cluster configuration; normalised JCT, one point per run, a linear "
             "regression")
    differs = ("the emulated copy of the rack (bmv2 aggregator, dilation 16) against the simulator on the same "
               "config, over Fig. 11's ToR PATs: one point per baseline and PAT, its average JCT over NetPack's on "
               "each back end; r compared (the paper does not say whether its 98% is r or R²; R² beside it)")
    backends = ("emu",)
    minutes = NetPackFig11.minutes
    vary, seeds = NetPackFig11.vary, NetPackFig11.seeds

    def base(self):
        """Fig. 11's config: the rack with NetPack and the paper's five baselines."""
        return NetPackFig11().base()

    def check(self, backend: str) -> str:
        from reproduce.runs import check_sweep

        return (f"{CONFIG_TESTBED}: {check_sweep(self.base(), self.vary, self.seeds, backend)}, and the same on the "
                f"simulator ({check_sweep(self.base(), self.vary, self.seeds, 'sim')})")

    def run(self, ctx: Context) -> Outcome:
        from reproduce.runs import run_sweep, sweep_trust_note

        measured = run_sweep(self.base(), self.vary, self.seeds, ctx, "testbed")
        simulated = run_sweep(self.base(), self.vary, self.seeds, dataclasses.replace(ctx, backend="sim"),
                              "simulator")
        fit = regression(paired(measured.rows, simulated.rows))
        absolute = regression(paired(measured.rows, simulated.rows, "jct_mean_s", (*PAPER_BASELINES, "netpack")))
        figures = (Figure(FIG6_R, fit and fit.r, (0.98, 0.98), self.source),)
        notes = [f"one point per baseline ({', '.join(PAPER_BASELINES)}) and {self.vary.split('=')[0]} value: its "
                 f"average JCT over NetPack's, the testbed's against the simulator's"]
        if fit is not None:
            notes.append(f"{len(fit.points)} points: r {fit.r:.3f}, R² {fit.r_squared:.3f}; testbed = "
                         f"{fit.slope:.3g} x simulator + {fit.intercept:.3g}")
        if absolute is not None:
            ratio = statistics.fmean(y / x for x, y in absolute.points)
            notes.append(f"the average JCTs themselves (NetPack's too, {len(absolute.points)} points): r "
                         f"{absolute.r:.3f}; the testbed's {number_text(ratio)} times the simulator's on average")
        trust = sweep_trust_note(self.base(), self.vary, self.seeds, measured.run_dir, ctx.backend)
        if trust:
            notes.append(trust)
        plot = None
        if fit is not None:
            xs = sorted(x for x, _ in fit.points)
            plot = draw(ctx.path("reproduction.png"), f"NetPack {self.source}: the testbed against the simulator", (
                Panel("average JCT over NetPack's, one point per baseline and PAT", "simulator", "testbed (emulated)",
                      (Series("runs", *zip(*fit.points, strict=True), points_only=True),
                       Series(f"least squares, r {fit.r:.3f}", (xs[0], xs[-1]),
                              tuple(fit.slope * x + fit.intercept for x in (xs[0], xs[-1])))),
                      guides=(("testbed = simulator", 1.0, None),)),))
        return Outcome(figures, tuple(notes), (measured.run_dir, simulated.run_dir), plot)


FIG10_SOURCE = "Fig. 10, §6.2"
SERVERS_PER_RACK, GPUS_PER_SERVER = 16, 4
"""The paper's simulated cluster's racks (§6.1): 16 servers of 4 GPUs each."""
FIG10_SERVERS = (100, 1_000, 10_000)
FIG10_JOBS = 4_000
PAPER_S_PER_JOB = {100: 3.25e-4, 10_000: 1.36e-2}
PAPER_TOTAL_S = 60.0  # "NetPack can compute the placement of 4K jobs within 1 minute"


@dataclasses.dataclass(frozen=True)
class PlacementTime:
    """NetPack placing a trace's jobs on one cluster, as they arrive and leave.

    Attributes:
        servers: the cluster's servers.
        placed: jobs placed (a job larger than the cluster is skipped; one waiting for GPUs when the
            trace ends is not placed).
        calls: ``place`` calls (one per arrival, with every job still waiting).
        seconds: wall-clock seconds spent in ``place`` alone.
    """

    servers: int
    placed: int
    calls: int
    seconds: float

    @property
    def per_call_s(self) -> float | None:
        return self.seconds / self.calls if self.calls else None

    @property
    def per_job_s(self) -> float | None:
        return self.seconds / self.placed if self.placed else None


def placement_time(servers: int, jobs, policy_kwargs: dict | None = None, hold: bool = True) -> PlacementTime:
    """Replay trace ``jobs`` (:class:`experiment.config.traces.TraceJob`, in arrival order) on a cluster of
    ``servers`` in racks of the paper's shape: at each arrival the jobs that ended by then leave, and
    NetPack places the waiting ones (each an INA job); only its ``place`` calls are timed. With ``hold``
    False every job leaves before the next arrives: each call places one job into an empty cluster."""
    from placement import Cluster, JobRequest, MachineInfo
    from placement.netpack.policy import NetPackPolicy

    cluster = Cluster([MachineInfo(f"h{i}", GPUS_PER_SERVER, rack=f"r{i // SERVERS_PER_RACK}", pod="p")
                       for i in range(servers)])
    policy = NetPackPolicy(**(policy_kwargs or {}))
    ends: list[tuple[float, str]] = []
    pending: list = []
    duration: dict[str, float] = {}
    placed, seconds, calls = 0, 0.0, 0
    for j in jobs:
        if j.gpus > servers * GPUS_PER_SERVER:
            continue
        while ends and ends[0][0] <= j.arrival_s:
            cluster.release(heapq.heappop(ends)[1])
        pending.append(JobRequest(j.name, "vgg16", j.gpus, "ina", j.arrival_s))
        duration[j.name] = j.duration_s
        t0 = time.perf_counter()
        out = policy.place(pending, cluster.view())
        seconds += time.perf_counter() - t0
        calls += 1
        for p in out:
            cluster.apply(p)
            heapq.heappush(ends, (j.arrival_s + (duration[p.job] if hold else 0.0), p.job))
        placed += len(out)
        started = {p.job for p in out}
        pending = [p for p in pending if p.name not in started]
    return PlacementTime(servers, placed, calls, seconds)


def philly_jobs(count: int = FIG10_JOBS):
    """The first ``count`` jobs of the shipped Philly trace, in arrival order."""
    from experiment.config.traces import read_trace
    from reproduce.runs import ROOT

    return read_trace(os.path.join(ROOT, "traces", "philly", "philly.csv"), max_jobs=count).jobs


class NetPackFig10(Reproduction):
    name = "netpack-fig10"
    paper = "NetPack"
    source = FIG10_SOURCE
    claim = ("NetPack places 4K jobs within 1 minute on 100 to 10K servers; the per-job placement time grows "
             "linearly with the cluster, from 3.25e-4 s (10^2 servers) to 1.36e-2 s (10^4)")
    setup = ("its placement algorithm alone on clusters of 100 to 10,000 servers of its simulator's shape, 4,000 "
             "real jobs; execution time, its host not stated")
    differs = ("the first 4,000 Philly jobs replayed at their submission times with their durations (at 100 "
               "servers most of them wait, so each call places the waiting queue); times per place() call on this "
               "machine's one core")
    backends = ("placement",)
    minutes = 0.5

    servers: tuple[int, ...] = FIG10_SERVERS
    jobs: int = FIG10_JOBS

    def check(self, backend: str) -> str:
        return (f"NetPack's place() on {', '.join(f'{n:,}' for n in self.servers)} servers, the first {self.jobs:,} "
                f"Philly jobs ({len(philly_jobs(self.jobs)):,} read)")

    def run(self, ctx: Context) -> Outcome:
        jobs = philly_jobs(self.jobs)
        times, alone = {}, {}
        for n in self.servers:
            ctx.say(f"  {n:,} servers: placing {len(jobs):,} jobs as they arrive and leave, then each into an "
                    f"empty cluster")
            times[n], alone[n] = placement_time(n, jobs), placement_time(n, jobs, hold=False)
        least, most = min(self.servers), max(self.servers)
        growth = (times[most].per_call_s / times[least].per_call_s
                  if times[most].per_call_s and times[least].per_call_s else None)
        figures = tuple(Figure(f"time per placed job at {n:,} servers", times[n].per_call_s, (s, s), self.source, "s")
                        for n, s in PAPER_S_PER_JOB.items() if n in times)
        figures += (Figure(f"its growth from {least:,} to {most:,} servers", growth,
                           (PAPER_S_PER_JOB[10_000] / PAPER_S_PER_JOB[100],) * 2, self.source, "x"),
                    Figure(f"total time for the {len(jobs):,} jobs at {most:,} servers", times[most].seconds,
                           (0.0, PAPER_TOTAL_S), self.source, "s"))
        alone_growth = alone[most].per_call_s / alone[least].per_call_s
        notes = ["a job's placement time is one place() call's: each arrival is one call, with the jobs still "
                 "waiting; " + "; ".join(f"{n:,} servers: {t.placed:,} placed in {t.calls:,} calls, {t.seconds:.1f} s"
                                         for n, t in times.items()),
                 "the queue, which the paper does not describe: with each job placed into an empty cluster (every "
                 "job gone before the next arrives), " + ", ".join(
                     f"{number_text(t.per_call_s)} s per job at {n:,} servers" for n, t in alone.items())
                 + f", growing {number_text(alone_growth)} times from {least:,} to {most:,} servers"]
        xs = tuple(float(n) for n in self.servers)
        plot = draw(ctx.path("reproduction.png"), f"NetPack {self.source}: placement time, ours beside the paper's", (
            Panel("time per placed job", "servers", "seconds per place() call",
                  (Series("ours, at the trace's times", xs, tuple(times[n].per_call_s for n in self.servers)),
                   Series("ours, each job into an empty cluster", xs,
                          tuple(alone[n].per_call_s for n in self.servers))),
                  tuple(PaperMark(float(n), s, s) for n, s in PAPER_S_PER_JOB.items()), log_x=True, log_y=True),))
        return Outcome(figures, tuple(notes), (), plot)
