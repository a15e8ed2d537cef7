"""MLTCP on two jobs that share a bottleneck (Cassini thesis, abstract and §1.2; ``docs/resolutions.md``
Cassini §6): the two VGG19-like jobs of ``experiments/cassini.yaml`` unshifted under MLTCP and under the
default congestion control, the iterations until they interleave (:mod:`experiment.reporting.interleaving`)
and the mean and p99 iteration-time gains; MLTCP-CUBIC on the emulator, F's slope swept on the
simulator. docs/reproductions.md describes the setting and the gaps.
"""

from __future__ import annotations

import dataclasses

from reproduce.base import Context, Figure, Outcome, Reproduction, number_text
from reproduce.plot import Panel, PaperMark, Series, draw

SOURCE = "abstract, §1.2"
PAPER = {"iterations": (0.0, 30.0), "mean": (1.0, 1.9), "p99": (1.0, 2.7)}
"""Within ~30 iterations; "up to" 1.9x and 2.7x: any gain up to them agrees."""
POLICY = "spread"
SLOPES = (0, 0.5, 1, 2, 4, 8, 20)
SEEDS = (1,)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What runs on one back end.

    Attributes:
        reno: the two-job config under MLTCP-Reno (its slope is F's; no MLTCP is the same config
            under the default congestion control).
        cubic: the same under MLTCP-CUBIC (None: not run).
        sweep_slopes: F's slopes swept on ``reno`` (empty: its slope only).
        note: why the plan is what it is, a line of the outcome's notes.
    """

    reno: str
    cubic: str | None
    sweep_slopes: tuple[float, ...]
    note: str


PLANS = {
    "emu": Plan("experiments/cassini_mltcp.yaml", "experiments/cassini_mltcp_cubic.yaml", (),
                "the emulated jobs start together; F's slope is the config's only (each slope is a run of "
                "minutes on the emulator: the slope trend is the simulator's, --backend sim)"),
    "sim": Plan("experiments/mltcp_slopes.yaml", None, SLOPES,
                "the simulated jobs start 5 ms apart (started at one instant, the fluid model never separates "
                "them); MLTCP-CUBIC is not run: the fluid model is one for both variants"),
}


@dataclasses.dataclass(frozen=True)
class Pair:
    """One run of the two jobs, as compared: its iteration times and how they interleaved.

    Attributes:
        times: every iteration of both jobs, start to start, pooled (virtual seconds).
        interleaved_from: the measured iteration from which both jobs are interleaved (None: never).
        overlap_mean, overlap_last: the Up-phase overlap over both jobs, over all iterations and the last few.
        marks: ECN marks per iteration and job (None: not measured).
    """

    times: tuple[float, ...]
    interleaved_from: int | None
    overlap_mean: float | None
    overlap_last: float | None
    marks: float | None


def pair(phases) -> Pair:
    """:class:`Pair` of a policy's timeline (with its overlaps, as every run annotates it)."""
    from experiment.reporting.interleaving import HOLD, interleaving
    from experiment.reporting.profiles import periods
    from experiment.reporting.timeline import mean_marks

    found = interleaving(phases)
    starts = [i.interleaved_from for i in found]
    last = [x for i in found for x in i.overlap[-HOLD:]]
    every = [x for i in found for x in i.overlap]
    marks = mean_marks(phases)
    return Pair(tuple(t for times in periods(phases).values() for t in times),
                max(starts) if starts and None not in starts else None,
                sum(every) / len(every) if every else None, sum(last) / len(last) if last else None,
                sum(marks.values()) / len(marks) if marks else None)


def gains(base: Pair, other: Pair) -> dict[str, float | None]:
    """The base run's mean and p99 iteration time over another's (above 1: the other is faster)."""
    from reproduce.cassini import speedups, stats

    return speedups(stats(list(base.times)), stats(list(other.times)), ("mean", "p99"))


def slope_trend(points: list[tuple[float, int | None]]) -> bool:
    """Whether the iterations to interleave do not grow as the slope grows (never counts as the most)."""
    ordered = [float("inf") if k is None else k for _, k in sorted(points)]
    return all(b <= a for a, b in zip(ordered, ordered[1:], strict=False))


class Mltcp(Reproduction):
    name = "mltcp"
    paper = "Cassini (MLTCP)"
    source = SOURCE
    claim = ("MLTCP approximates the optimal interleaved schedule within ~30 training iterations and improves the "
             "mean and p99 iteration time by up to 1.9x and 2.7x")
    setup = ("12 servers of one A100 and a 50 Gbit/s RDMA NIC, nine models, MLTCP on Reno, CUBIC, DCTCP and DCQCN "
             "(its chapter, with F, the topology and the figures, is not in the supplied thesis)")
    differs = ("two VGG19-like jobs of 2 single-GPU workers across one 2:1 uplink at 25 Gbit/s, scale 500; F = 20 x "
               "bytes_ratio + 1; MLTCP-Reno and MLTCP-CUBIC on the emulator, the fluid model of F's share on the "
               "simulator; no MLTCP is TCP CUBIC, the config's default")
    backends = ("emu", "sim")
    minutes = 5.0

    def configs(self, backend: str):
        """The plan, and its configs: no MLTCP, MLTCP-Reno, MLTCP-CUBIC (None: not run)."""
        from experiment.config.schema import ExperimentConfig
        from reproduce.runs import load

        plan = PLANS[backend]
        reno = load(plan.reno)
        default = {f.name: f.default for f in dataclasses.fields(ExperimentConfig)}["congestion_control"]
        return plan, dataclasses.replace(reno, congestion_control=default), reno, plan.cubic and load(plan.cubic)

    def check(self, backend: str) -> str:
        from reproduce.runs import check_config, check_sweep

        plan, base, reno, cubic = self.configs(backend)
        check_config(base, backend)
        what = [f"{plan.reno} under {base.congestion_control} (no MLTCP) and {reno.congestion_control}: "
                f"{check_config(reno, backend)}"]
        if cubic:
            what.append(f"{plan.cubic}: {check_config(cubic, backend)}")
        if plan.sweep_slopes:
            what.append(check_sweep(reno, _vary(plan), SEEDS, backend))
        return "; ".join(what)

    def run(self, ctx: Context) -> Outcome:
        from experiment.reporting.interleaving import HOLD, OVERLAP_THRESHOLD
        from reproduce.runs import run_config, run_sweep, sweep_timelines, trust_note

        plan, base_cfg, reno_cfg, cubic_cfg = self.configs(ctx.backend)
        outs = {"no MLTCP": run_config(base_cfg, ctx, "no-mltcp"),
                "MLTCP-Reno": run_config(reno_cfg, ctx, "mltcp-reno")}
        if cubic_cfg:
            outs["MLTCP-CUBIC"] = run_config(cubic_cfg, ctx, "mltcp-cubic")
        pairs = {k: pair(out.runs[POLICY].timeline) for k, out in outs.items()}
        warmup, slope = reno_cfg.warmup_iterations, reno_cfg.mltcp.slope
        figures, notes = [], [plan.note]
        for variant in [k for k in pairs if k != "no MLTCP"]:
            p, g = pairs[variant], gains(pairs["no MLTCP"], pairs[variant])
            figures += [Figure(f"iterations until the jobs interleave, {variant} (slope {slope:g}, warm-up included)",
                               None if p.interleaved_from is None else warmup + p.interleaved_from,
                               PAPER["iterations"], SOURCE, "iterations"),
                        Figure(f"mean iteration time, no MLTCP over {variant}", g["mean"], PAPER["mean"], SOURCE, "x"),
                        Figure(f"p99 iteration time, no MLTCP over {variant}", g["p99"], PAPER["p99"], SOURCE, "x")]
        iterations = reno_cfg.iterations
        notes.append(f"iterations are start to start, pooled over both jobs' {iterations} measured iterations after "
                     f"{warmup} warm-up; interleaved: both jobs' Up phases overlap at most {OVERLAP_THRESHOLD:.0%} "
                     f"for {HOLD} iterations in a row")
        notes += [f"{k}: {_described(p, iterations)}" for k, p in pairs.items()]
        trend = []
        if plan.sweep_slopes:
            sweep = run_sweep(reno_cfg, _vary(plan), SEEDS, ctx, "slopes")
            trend = [(s, None if (k := pair(phases).interleaved_from) is None else warmup + k)
                     for s, _, phases in sweep_timelines(reno_cfg, _vary(plan), SEEDS, sweep.run_dir, POLICY,
                                                         ctx.backend)]
            notes.append("iterations until interleaved per slope of F (warm-up included): "
                         + ", ".join(f"{number_text(s)}: {'never' if k is None else k}" for s, k in trend)
                         + f"; {'non-increasing' if slope_trend(trend) else 'NOT non-increasing'} as the slope grows")
        for k, out in outs.items():
            trust = trust_note(out, k)
            if trust:
                notes.append(trust)
        runs = [out.run_dir for out in outs.values()] + ([ctx.path("slopes")] if plan.sweep_slopes else [])
        return Outcome(tuple(figures), tuple(notes), tuple(runs), _plot(ctx, pairs, trend))


def _vary(plan: Plan) -> str:
    return "mltcp.slope=" + ",".join(f"{s:g}" for s in plan.sweep_slopes)


def _described(p: Pair, iterations: int) -> str:
    from experiment.reporting.interleaving import HOLD

    when = (f"interleaved from measured iteration {p.interleaved_from}" if p.interleaved_from is not None
            else f"not interleaved in {iterations} iterations")
    return (f"{when}; Up-phase overlap {number_text(p.overlap_mean)} on average, {number_text(p.overlap_last)} over "
            f"the last {HOLD}; ECN marks per iteration and job {number_text(p.marks)}")


def _plot(ctx: Context, pairs: dict[str, Pair], trend: list) -> str:
    from reproduce.cassini import stats

    variants = [k for k in pairs if k != "no MLTCP"]
    its = {k: stats(list(p.times)) for k, p in pairs.items()}
    panels = [Panel("iteration time", "statistic", "iteration time (s)",
                    tuple(Series(k, ("mean", "p99"), (its[k]["mean"], its[k]["p99"])) for k in pairs), bars=True),
              Panel("no MLTCP's iteration time over MLTCP's", "statistic", "speed-up",
                    tuple(Series(k, ("mean", "p99"), tuple(gains(pairs["no MLTCP"], pairs[k]).values()))
                          for k in variants),
                    tuple(PaperMark(k, *PAPER[k]) for k in ("mean", "p99")), bars=True)]
    if trend:
        panels.append(Panel("iterations until interleaved per slope", "F's slope", "iterations (warm-up included)",
                            (Series("ours", tuple(s for s, _ in trend), tuple(k for _, k in trend)),),
                            (PaperMark(max(s for s, _ in trend), *PAPER["iterations"]),)))
    return draw(ctx.path("reproduction.png"), f"MLTCP ({ctx.backend}): two jobs on one bottleneck", tuple(panels))
