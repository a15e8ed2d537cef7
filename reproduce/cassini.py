"""Cassini's time shift on two jobs (Cassini thesis Fig. 4.2: ``experiments/cassini.yaml``, no shift
against Cassini's, with its gap swept over the share of an iteration spent communicating), and Th+Cassini
against Themis on a Poisson trace (Fig. 4.11(b): ``experiments/cassini_trace.yaml`` with an Ideal run),
each on iteration times as the thesis measures them; ``docs/resolutions.md`` Cassini §7.1, §7.4, and
docs/reproductions.md for the settings and the gaps.
"""

from __future__ import annotations

import dataclasses
import os

from reproduce.base import Context, Figure, Outcome, Reproduction, number_text
from reproduce.plot import Panel, PaperMark, Series, draw
from reproduce.sensitivity import Explanation, Sensitivity

CONFIG = "experiments/cassini_testbed_trace.yaml"
TRACES = tuple(f"experiments/traces/cassini-thesis-24gpu-s{seed}.csv" for seed in (1, 2, 3))
"""The trace's three seeds (``experiment.config.poisson``, seeds 1-3): one experiment each."""
SOURCE = "Fig. 4.11(b), §4.5"
BASE, CASSINI, RANKING = "themis", "cassini,inner=themis", "cassini,inner=themis,shift=false"
PAPER = {"mean": 1.6, "p99": 1.8}


IDEAL_ARRIVAL_SCALE = 1000.0  # the trace's submissions this much further apart: every job runs alone
MEAN_SPEEDUP = "Themis's mean iteration time over Th+Cassini's"
THESIS_VGG16 = {"iteration_ms": 255.0, "compute_ms": 141.0}
"""The thesis's VGG16 alone on its A100s (Fig. 4.3: Down 141 ms, Up 114 ms): its one stated compute time."""
# What a placement can win is what the jobs spend communicating, which their compute time sets: our
# profiles compute at V100-class speed, the thesis's testbed has A100s, and its one stated compute time
# (its VGG16's) is about half ours. The sweep runs the first seed at the GPUs' speeds, as `compute_scale`.
FIG411_SENSITIVITY = Sensitivity(
    MEAN_SPEEDUP, "the jobs' compute time per iteration over our profiles' (V100-class)",
    "trace.compute_scale=1,0.507,0.35", (1,),
    "A100 GPUs; its VGG16 computes 141 ms of a 255 ms iteration alone (Fig. 4.3), 0.507 of our VGG16's 278 ms")


def stats(values: list[float]) -> dict[str, float | None]:
    """Mean, 90th and 99th percentile (None without any value)."""
    from experiment.reporting.report import percentile

    return {"mean": sum(values) / len(values) if values else None, "p90": percentile(values, 90),
            "p99": percentile(values, 99)}


def iteration_times(timeline) -> list[float]:
    """Every iteration of every job of a policy's timeline (``timeline.csv``), pooled as the thesis's CDF
    pools them: each from its first rank's start to its last rank's end."""
    return [p.end_s - p.start_s for p in timeline]


def logged_shifts(run) -> list[dict]:
    """Every time shift Cassini's decisions logged in a policy's run (its ``decisions.json``), in order:
    ``job``, ``shift_s`` and ``period_s`` (the job's profiled period)."""
    return [s for d in run.decisions for s in d.get("log", {}).get("shifts", ())]


def speedups(base: dict, other: dict, keys: tuple[str, ...] = tuple(PAPER)) -> dict[str, float | None]:
    """The base policy's statistics ``keys`` over another policy's (above 1: the other is faster)."""
    return {k: base[k] / other[k] if base[k] and other[k] else None for k in keys}


def overlapping(summary) -> int:
    """How many of a run's jobs started before every job started before them had ended."""
    spans = sorted((j.start_s, j.end_s) for j in summary.jobs if j.start_s is not None and j.end_s is not None)
    count, busy_until = 0, float("-inf")
    for start, end in spans:
        count += start < busy_until
        busy_until = max(busy_until, end)
    return count


class CassiniFig411(Reproduction):
    name = "cassini-fig4.11"
    paper = "Cassini"
    source = SOURCE
    claim = ("Th+Cassini improves the average and the 99th-percentile iteration time over Themis by 1.6x and 1.8x "
             "(and is close to the Ideal, every job alone)")
    setup = ("its testbed (24 GPUs, 13 switches, 48 links, 2:1, DCQCN): a Poisson trace of 13 models, jobs of "
             "200-1,000 iterations whose 10-minute GPU leases expire and are re-auctioned; the CDF of every job's "
             "iteration times, mean and p99")
    differs = ("the simulator's step-level engine on the thesis's fabric as docs/resolutions.md reads it (its "
               "figure is missing), 5 data-parallel models (those with a profile here), three 40-job seeds "
               "pooled; at our profiles' compute times a job of 200-1,000 iterations lasts 1-5 minutes, so few "
               "leases expire")
    minutes = 180.0

    def configs(self):
        """Per seed, the trace under the three policies and the Ideal: Themis with every job alone."""
        from reproduce.runs import ROOT, load

        cfg = load(CONFIG)
        out = []
        for seed, path in enumerate(TRACES, 1):
            seeded = dataclasses.replace(cfg, seed=seed, trace=dataclasses.replace(
                cfg.trace, file=os.path.join(ROOT, path)))
            alone = dataclasses.replace(seeded, policies=(BASE,), trace=dataclasses.replace(
                seeded.trace, arrival_scale=seeded.trace.arrival_scale * IDEAL_ARRIVAL_SCALE))
            out.append((seed, seeded, alone))
        return out

    def check(self, backend: str) -> str:
        from reproduce.runs import check_config, check_sweep

        seed, cfg, alone = self.configs()[0]
        s = FIG411_SENSITIVITY
        return (f"{CONFIG}, {len(TRACES)} seeds of its trace: {check_config(cfg, backend)}; the Ideal: "
                f"{check_config(alone, backend)}, the submissions {IDEAL_ARRIVAL_SCALE:g} times further apart; the "
                f"gap, swept on the first seed: {check_sweep(cfg, s.vary, s.seeds, 'sim')}")

    def run(self, ctx: Context) -> Outcome:
        from reproduce.runs import run_config

        pooled: dict[str, list[float]] = {}
        per_seed, run_dirs, overlaps, preempted = [], [], 0, {}
        for seed, cfg, alone in self.configs():
            out = run_config(cfg, ctx, f"seed{seed}/run")
            ideal = run_config(alone, ctx, f"seed{seed}/ideal")
            run_dirs += [out.run_dir, ideal.run_dir]
            times = {p: iteration_times(run.timeline) for p, run in out.runs.items()}
            times["ideal"] = iteration_times(ideal.runs[BASE].timeline)
            for p, t in times.items():
                pooled.setdefault(p, []).extend(t)
            per_seed.append((seed, speedups(stats(times[BASE]), stats(times[CASSINI]))))
            overlaps += overlapping(ideal.runs[BASE].summary)
            for p, run in out.runs.items():
                preempted[p] = preempted.get(p, 0) + run.summary.preemptions
        its = {p: stats(times) for p, times in pooled.items()}
        with_shift, ranking = speedups(its[BASE], its[CASSINI]), speedups(its[BASE], its[RANKING])
        to_ideal, base_to_ideal = speedups(its[CASSINI], its["ideal"]), speedups(its[BASE], its["ideal"])
        figures = (Figure(MEAN_SPEEDUP, with_shift["mean"], (PAPER["mean"],) * 2, SOURCE, "x"),
                   Figure("Themis's p99 iteration time over Th+Cassini's", with_shift["p99"], (PAPER["p99"],) * 2,
                          SOURCE, "x"))
        explanation, sweep_dir, p99s = self.explain(ctx, figures[0])
        run_dirs.append(sweep_dir)
        plot = draw(ctx.path("reproduction.png"), f"Cassini {SOURCE}: Themis's iteration times over the policy's", (
            Panel("iteration-time speed-up over Themis", "statistic", "Themis's iteration time / the policy's",
                  (Series("ours: Th+Cassini", ("mean", "p99"), (with_shift["mean"], with_shift["p99"])),
                   Series("ours: ranking only (shift=false)", ("mean", "p99"), (ranking["mean"], ranking["p99"])),
                   Series("ours: Ideal (every job alone)", ("mean", "p99"), tuple(base_to_ideal.values()))),
                  tuple(PaperMark(k, v, v) for k, v in PAPER.items()), bars=True),
            Panel("the gap, swept (seed 1)", "compute time over our profiles'", "Themis's mean / Th+Cassini's",
                  (Series("ours", *zip(*explanation.points, strict=True)),),
                  levels=(("paper", explanation.target),))))
        per_policy = sum(map(len, pooled.values())) // max(1, len(pooled))
        notes = (f"iteration times pooled over every job of the {len(per_seed)} seeds, as the thesis's CDF pools "
                 f"an experiment's (about {per_policy} per policy)",
                 "per seed, Themis's iteration time over Th+Cassini's: " + "; ".join(
                     f"seed {seed}: {_ratios(r)}" for seed, r in per_seed),
                 f"the ranking alone (shift=false): Themis's iteration time over it {_ratios(ranking)}",
                 f"Th+Cassini's iteration time over the Ideal's (every job alone, the thesis: similar): "
                 f"{_ratios(to_ideal)}" + (f" ({overlaps} jobs of the Ideal's runs overlapped another)" if overlaps
                                           else ""),
                 f"Themis's iteration time over the Ideal's, the most any placement could win on these traces: "
                 f"{_ratios(base_to_ideal)}",
                 "jobs preempted when their lease expired and they lost the auction, over the seeds: " + ", ".join(
                     f"{p} {n}" for p, n in preempted.items()),
                 "the thesis measured on its testbed with DCQCN; this is the simulator's step-level engine "
                 "(docs/cassini.md: why such a trace shows little gain)",
                 f"the gap's sweep, seed 1, Themis's p99 iteration time over Th+Cassini's per compute time: {p99s}")
        return Outcome(figures, notes, tuple(run_dirs), plot, (explanation,))

    def explain(self, ctx: Context, figure: Figure) -> tuple[Explanation, str, str]:
        """The mean speed-up against the jobs' compute time, swept on the first seed without the ranking
        and the Ideal (:data:`FIG411_SENSITIVITY`); the explanation, the sweep's directory and the p99
        speed-up per compute time, in words."""
        from reproduce.runs import run_sweep, sweep_timelines

        s = FIG411_SENSITIVITY
        _, cfg, _ = self.configs()[0]
        cfg = dataclasses.replace(cfg, policies=(BASE, CASSINI))
        result = run_sweep(cfg, s.vary, s.seeds, dataclasses.replace(ctx, backend="sim"), "sensitivity")
        times: dict = {}
        for policy in (BASE, CASSINI):
            for value, _, timeline in sweep_timelines(cfg, s.vary, s.seeds, result.run_dir, policy, "sim"):
                times.setdefault(value, {})[policy] = stats(iteration_times(timeline))
        gains = {value: speedups(t[BASE], t[CASSINI]) for value, t in times.items()}
        points = tuple((float(value), g["mean"]) for value, g in gains.items())
        p99s = "; ".join(f"{float(value):g}: {number_text(g['p99'])}x" for value, g in gains.items())
        return Explanation(s, figure.nearest_end, points), result.run_dir, p99s


def _ratios(r: dict) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in r.items() if v is not None) or "-"


FIG42_CONFIG = "experiments/cassini.yaml"
FIG42_SOURCE = "Fig. 4.2(d)"
UNSHIFTED, SHIFTED = "spread", "cassini,inner=spread"
FIG42_PAPER = {"p90": 1.26, "shift_ms": 120.0}
POOLED_P90 = "p90 iteration time, no shift over Cassini's shift, pooled"
# Two identical jobs meeting for all of their communication take c + 2m per iteration, c + m once
# interleaved: the shift's gain is about one plus the share of an iteration spent communicating, which
# the thesis does not give for this figure. The links' rate sets it (the compute time is the profile's).
FIG42_SENSITIVITY = Sensitivity(
    POOLED_P90, "the share of its iteration our VGG19 communicates once shifted, set by the link rate (%; the "
    "simulator)", "topology.host_bw_mbps=25000,35000,50000,75000,100000", (1,),
    "it gives neither its VGG19's iteration nor its communication time for Fig. 4.2 (its NICs are 50 Gbit/s)")


def shift_gains(timelines: dict) -> dict[str, dict[str, float | None]]:
    """Per job and pooled over the jobs (``"pooled"``), the unshifted policy's mean and p90 iteration
    time over the shifted one's, from each policy's timeline; an iteration is start to start."""
    from experiment.reporting.profiles import periods

    per_job = {p: periods(timelines[p]) for p in (UNSHIFTED, SHIFTED)}
    jobs = sorted(per_job[UNSHIFTED])
    its = {p: {**{job: stats(times[job]) for job in jobs}, "pooled": stats([t for job in jobs for t in times[job]])}
           for p, times in per_job.items()}
    return {k: speedups(its[UNSHIFTED][k], its[SHIFTED][k], ("mean", "p90")) for k in (*jobs, "pooled")}


def communication_share(timeline) -> float | None:
    """The share of their iteration the jobs of a timeline spend in their Up phase, in %, averaged over them."""
    from experiment.reporting.profiles import timings

    t = timings(timeline).values()
    return 100 * sum(j["up_ms"] / j["iter_ms"] for j in t) / len(t) if t else None


class CassiniFig42(Reproduction):
    name = "cassini-fig4.2"
    paper = "Cassini"
    source = FIG42_SOURCE
    claim = ("delaying the second of two VGG19 jobs that share a bottleneck by 120 ms interleaves their "
             "communication and improves both jobs' p90 iteration time by 1.26x")
    setup = ("its testbed (A100 GPUs, 50 Gbit/s ConnectX-5 NICs, DCQCN): two data-parallel VGG19 jobs of 1,000 "
             "iterations on one bottleneck link, fair sharing against the time shift; the CDF of each job's "
             "iteration times")
    differs = ("4 single-GPU machines in 2 racks whose 2:1 uplink both jobs' rings cross, 25 Gbit/s at scale 500, "
               "TCP CUBIC with ECN, 30 iterations; our VGG19 profile's compute and communication times, so another "
               "shift (both stated with the run)")
    backends = ("emu", "sim")
    minutes = 2.5

    def check(self, backend: str) -> str:
        from reproduce.runs import check_config, check_sweep, load

        cfg = load(FIG42_CONFIG)
        s = FIG42_SENSITIVITY
        return (f"{FIG42_CONFIG}: {check_config(cfg, backend)}; the gap, swept on the simulator: "
                f"{check_sweep(cfg, s.vary, s.seeds, 'sim')}")

    def run(self, ctx: Context) -> Outcome:
        from experiment.reporting.profiles import timings
        from reproduce.runs import load, run_config, trust_note

        cfg = load(FIG42_CONFIG)
        out = run_config(cfg, ctx, "run")
        gain = shift_gains({p: run.timeline for p, run in out.runs.items()})
        keys = tuple(gain)
        shifts = {j.job: j.time_shift_s for j in out.runs[SHIFTED].summary.jobs}
        shifted = max(shifts, key=lambda job: shifts[job] or 0.0)
        shift_ms = None if shifts[shifted] is None else shifts[shifted] * 1e3
        figures = (*(Figure(f"p90 iteration time, no shift over Cassini's shift, {k}", gain[k]["p90"],
                            (FIG42_PAPER["p90"],) * 2, FIG42_SOURCE, "x") for k in keys),
                   Figure(f"Cassini's time shift on the second job ({shifted})", shift_ms,
                          (FIG42_PAPER["shift_ms"],) * 2, "Fig. 4.2", "ms"))
        alone = timings(out.runs[SHIFTED].timeline)[shifted]
        profiled = {s["job"]: s["period_s"] * 1e3 for s in logged_shifts(out.runs[SHIFTED])}
        explanation, sweep_dir, rates = self.explain(cfg, ctx, next(f for f in figures if f.quantity == POOLED_P90))
        notes = [f"an iteration is start to start (a shifted job's waits for its instants count); p90 and mean over "
                 f"each job's {cfg.iterations - 1} iterations, and pooled over both",
                 "mean iteration time, no shift over the shift: " + ", ".join(
                     f"{k} {gain[k]['mean']:.2f}" for k in keys if gain[k]["mean"] is not None),
                 f"Cassini profiled our VGG19 (scale {cfg.scale:g}) at a period of {_ms(profiled.get(shifted))} and "
                 f"shifted {shifted} by {_ms(shift_ms)}, {_share(shift_ms, profiled.get(shifted))} of it: the rotation "
                 f"that puts one job's communication in the other's compute. Once shifted it iterates in "
                 f"{alone['iter_ms']:.0f} ms and communicates {alone['up_ms']:.0f} ms of it "
                 f"({alone['up_ms'] / alone['iter_ms']:.0%}). The thesis gives neither its VGG19's iteration nor its "
                 f"communication time for Fig. 4.2, so its 120 ms is not ours to match",
                 ("the emulator's measurement" if out.runs[SHIFTED].summary.emulated.trustworthy is not None else
                  "the simulator's estimate (the thesis's figure is a testbed measurement: --backend emu)")]
        notes.append(f"the gap's sweep on the simulator, per link rate: the share of an iteration communicating "
                     f"once shifted and the pooled p90 gain: {rates}")
        trust = trust_note(out)
        if trust:
            notes.append(trust)
        plot = draw(ctx.path("reproduction.png"), f"Cassini {FIG42_SOURCE} ({ctx.backend}): no shift over the shift", (
            Panel("iteration-time speed-up of the shift", "job", "iteration time without / with the shift",
                  (Series("ours: p90", keys, tuple(gain[k]["p90"] for k in keys)),
                   Series("ours: mean", keys, tuple(gain[k]["mean"] for k in keys))),
                  tuple(PaperMark(k, FIG42_PAPER["p90"], FIG42_PAPER["p90"]) for k in keys), bars=True),
            Panel("the gap, swept (simulator)", "communication share of an iteration (%)", "pooled p90 speed-up",
                  (Series("ours", *zip(*explanation.points, strict=True)),),
                  levels=(("paper", explanation.target),))))
        return Outcome(figures, tuple(notes), (out.run_dir, sweep_dir), plot, (explanation,))

    def explain(self, cfg, ctx: Context, figure: Figure) -> tuple[Explanation, str, str]:
        """The pooled p90 gain against the share of an iteration spent communicating, the link rate swept
        on the simulator (:data:`FIG42_SENSITIVITY`); the explanation, the sweep's directory and the
        communication share and gain per link rate, in words."""
        from reproduce.runs import run_sweep, sweep_timelines

        s = FIG42_SENSITIVITY
        sim = dataclasses.replace(ctx, backend="sim")
        result = run_sweep(cfg, s.vary, s.seeds, sim, "sensitivity")
        by_value: dict = {}
        for value, _, timeline in sweep_timelines(cfg, s.vary, s.seeds, result.run_dir, UNSHIFTED, "sim"):
            by_value.setdefault(value, {})[UNSHIFTED] = timeline
        for value, _, timeline in sweep_timelines(cfg, s.vary, s.seeds, result.run_dir, SHIFTED, "sim"):
            by_value[value][SHIFTED] = timeline
        points = tuple((communication_share(t[SHIFTED]), shift_gains(t)["pooled"]["p90"]) for t in by_value.values())
        rates = "; ".join(f"{float(v) / 1000:g} Gbit/s: {number_text(share)}%, {number_text(g)}x"
                          for v, (share, g) in zip(by_value, points, strict=True))
        return Explanation(s, figure.nearest_end, points), result.run_dir, rates


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f} ms"


def _share(x: float | None, of: float | None) -> str:
    return "-" if x is None or not of else f"{x / of:.2f}"
