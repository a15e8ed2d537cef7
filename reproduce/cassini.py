"""Cassini with a Themis-like scheduler against Themis alone (Cassini thesis Fig. 4.11(b), §4.5;
``docs/resolutions.md`` Cassini §7.4).

The thesis: on a Poisson trace on its 24-GPU testbed, Th+Cassini improves the average and the
99th-percentile iteration time over Themis by 1.6x and 1.8x. Here ``experiments/cassini_trace.yaml``
runs Themis and Th+Cassini on the simulator's step-level engine (every transfer modelled, so jobs
that interleave meet less contention): 40 jobs of the thesis's models on 24 single-GPU machines at
50 Gbit/s, 2:1 oversubscribed, at an offered load of 0.9; plus Cassini's ranking without its time
shifts. What is compared is JCT, not the thesis's iteration times; docs/cassini.md explains the gap.
"""

from __future__ import annotations

from reproduce.base import Context, Figure, Outcome, Reproduction
from reproduce.plot import Panel, PaperMark, Series, draw

CONFIG = "experiments/cassini_trace.yaml"
SOURCE = "Fig. 4.11(b), §4.5"
BASE, CASSINI, RANKING = "themis", "cassini,inner=themis", "cassini,inner=themis,shift=false"
PAPER = {"mean": 1.6, "p99": 1.8}


def jct_stats(jcts: list[float]) -> dict[str, float | None]:
    """Mean and 99th percentile of JCTs (None without any)."""
    from experiment.reporting.report import percentile

    return {"mean": sum(jcts) / len(jcts) if jcts else None, "p99": percentile(jcts, 99)}


def speedups(base: dict, other: dict) -> dict[str, float | None]:
    """Themis's JCT statistic over another policy's (above 1: the other is faster)."""
    return {k: base[k] / other[k] if base[k] and other[k] else None for k in PAPER}


class CassiniFig411(Reproduction):
    name = "cassini-fig4.11"
    paper = "Cassini"
    source = SOURCE
    claim = ("Th+Cassini improves the average and the 99th-percentile iteration time over Themis by 1.6x and 1.8x "
             "(and is close to the Ideal, every job alone)")
    setup = ("its testbed (24 GPUs, 13 switches, DCQCN): a Poisson trace of 13 models whose GPU leases "
             "expire and are re-auctioned; the CDF of every job's iteration times, mean and p99")
    differs = ("the simulator's step-level engine on 24 single-GPU machines in 6 racks of a 2:1 fabric, 5 "
               "data-parallel models, one 40-job seed; JCT compared rather than iteration times; jobs end before "
               "their lease expires; no Ideal baseline")
    minutes = 4.0

    def check(self, backend: str) -> str:
        from reproduce.runs import check_config, load

        return f"{CONFIG}: {check_config(load(CONFIG), backend)}"

    def run(self, ctx: Context) -> Outcome:
        from reproduce.runs import load, run_config

        out = run_config(load(CONFIG), ctx, "run")
        stats = {p: jct_stats([j.jct_s for j in run.summary.jobs if j.jct_s is not None])
                 for p, run in out.runs.items()}
        with_shift, ranking = speedups(stats[BASE], stats[CASSINI]), speedups(stats[BASE], stats[RANKING])
        figures = (Figure("Themis's mean JCT over Th+Cassini's", with_shift["mean"], (PAPER["mean"],) * 2, SOURCE, "x"),
                   Figure("Themis's p99 JCT over Th+Cassini's", with_shift["p99"], (PAPER["p99"],) * 2, SOURCE, "x"))
        plot = draw(ctx.path("reproduction.png"), f"Cassini {SOURCE}: Themis's JCT over Th+Cassini's", (
            Panel("JCT speed-up over Themis", "statistic", "Themis's JCT / the policy's",
                  (Series("ours: Th+Cassini", ("mean", "p99"), (with_shift["mean"], with_shift["p99"])),
                   Series("ours: ranking only (shift=false)", ("mean", "p99"), (ranking["mean"], ranking["p99"]))),
                  tuple(PaperMark(k, v, v) for k, v in PAPER.items()), bars=True),))
        ratios = ", ".join(f"{k} {v:.2f}" for k, v in ranking.items() if v is not None)
        notes = (f"the ranking alone (shift=false): Themis's JCT over it {ratios}",
                 "the thesis measured on its testbed with DCQCN; this is the simulator's step-level engine on a "
                 "Poisson trace of the thesis's models (docs/cassini.md: why this trace shows no gain)")
        return Outcome(figures, notes, (out.run_dir,), plot)
