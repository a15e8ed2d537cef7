"""Cassini's snapshot trace (thesis Table 4.3, §4.5.5): each of five sets of jobs sharing one link
from the start, Cassini's compatibility score for it, and every job's communication time without
(Themis) and with Cassini's time shifts, with the gap swept over the grid iteration times are
rounded to before the unified circle is drawn (``experiments/cassini_snapshots.yaml``;
docs/reproductions.md and docs/cassini.md for the setting and the gaps).

The thesis gives each snapshot's jobs by model and batch size, and their communication times;
where its Table 3.1 gives the same jobs' iteration time under fair sharing (snapshots 1, 2 and 5:
the same models at the same batch sizes), a job's compute time is that iteration time less its
communication time under Themis (``docs/resolutions.md`` Cassini §7.3); elsewhere it is our
profile's.
"""

from __future__ import annotations

import dataclasses
import statistics

from reproduce.base import Context, Figure, Outcome, Reproduction, number_text
from reproduce.cassini import logged_shifts
from reproduce.plot import Panel, PaperMark, Series, draw
from reproduce.sensitivity import Explanation, Sensitivity

CONFIG = "experiments/cassini_snapshots.yaml"
SOURCE = "Table 4.3, §4.5.5"
UNSHIFTED, SHIFTED = "spread", "cassini,inner=spread"
QUANTA_MS = (1, 5, 10, 20)
"""The iteration-time grids swept (ms; the first is Cassini's default, ``docs/algorithms.md``)."""


@dataclasses.dataclass(frozen=True)
class SnapshotJob:
    """A job of a snapshot, with the thesis's numbers for it.

    Attributes:
        name: its name in the run.
        model: our profile of the thesis's model.
        batch: the thesis's batch size (for the record; our profile's compute is per its own batch).
        comm_ms: the thesis's average communication time (Th+Cassini, Themis), ms.
        fair_iteration_ms: Table 3.1's iteration time of the same job under fair sharing, ms (None:
            the thesis gives none).
    """

    name: str
    model: str
    batch: int
    comm_ms: tuple[float, float]
    fair_iteration_ms: float | None = None

    @property
    def compute_ms(self) -> float:
        """Its compute time per iteration: the fair iteration time less Themis's communication time
        (0: our profile's)."""
        return 0.0 if self.fair_iteration_ms is None else self.fair_iteration_ms - self.comm_ms[1]

    @property
    def gain(self) -> float:
        """The thesis's communication time under Themis over Th+Cassini's."""
        return self.comm_ms[1] / self.comm_ms[0]


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """One row group of Table 4.3: its jobs, Cassini's score and the shifts it computed (ms)."""

    index: int
    score: float
    jobs: tuple[SnapshotJob, ...]
    shifts_ms: tuple[float, ...]

    @property
    def gain(self) -> float:
        """The thesis's gain, averaged over the snapshot's jobs."""
        return statistics.fmean(j.gain for j in self.jobs)

    def settings(self) -> list[str]:
        """``--set`` changes that put the snapshot on :data:`CONFIG`'s shared uplink."""
        jobs = ", ".join(f"{{name: {j.name}, model: {j.model}, workers: 2, collective: ring, compute_ms: "
                         f"{j.compute_ms:g}}}" for j in self.jobs)
        n = len(self.jobs)
        return [f"topology.hosts_per_leaf={n}", f"topology.oversubscription={n}", f"jobs=[{jobs}]"]


SNAPSHOTS = (
    Snapshot(1, 1.0, (SnapshotJob("wide_resnet101", "wide_resnet101", 800, (138, 206), 295),
                      SnapshotJob("vgg16", "vgg16", 1400, (148, 199), 294)), (0, 150)),
    Snapshot(2, 1.0, (SnapshotJob("vgg19", "vgg19", 1400, (168, 220), 389),
                      SnapshotJob("vgg16", "vgg16", 1700, (163, 220), 389),
                      SnapshotJob("resnet50", "resnet50", 1600, (59, 55), 167)), (0, 158, 46)),
    Snapshot(3, 0.9, (SnapshotJob("vgg19", "vgg19", 1024, (166, 176)),
                      SnapshotJob("vgg16", "vgg16", 1200, (168, 177))), (0, 100)),
    Snapshot(4, 0.8, (SnapshotJob("roberta-a", "roberta_base", 12, (164, 210)),
                      SnapshotJob("roberta-b", "roberta_base", 12, (180, 208))), (0, 60)),
    Snapshot(5, 0.6, (SnapshotJob("bert", "bert_base", 8, (209, 213), 320),
                      SnapshotJob("vgg19", "vgg19", 1400, (294, 292), 494),
                      SnapshotJob("wide_resnet101", "wide_resnet101", 800, (265, 266), 466)), (0, 42, 191)),
)
"""Table 4.3 (docs/resolutions.md Cassini §7.3), with Table 3.1's fair iteration times of the same jobs."""

QUANTUM = Sensitivity(
    "Cassini's score, snapshot 1", "the grid iteration times are rounded to before the unified circle (ms; the "
    "simulator)", f"cassini quantum_ms={','.join(map(str, QUANTA_MS))}", (1,),
    "it does not say how its iteration times are rounded (docs/resolutions.md, Cassini §3.2); its snapshot 1's "
    "jobs iterate in 294 and 295 ms under fair sharing, ours in periods 7% apart, whose unified circle at a 1 ms "
    "grid is too long for 72 angles to place a phase on")


PERIOD_COMPUTE_MS = (89, 96, 103)
"""Snapshot 1's WideResNet-101 compute times swept (ms): the thesis's implied 89 ms, then its
period closer to VGG16's, then equal to it (at 50 Gbit/s)."""
PERIODS = Sensitivity(
    "communication time, Themis over Th+Cassini, snapshot 1 (mean over its jobs)",
    "how far apart the two jobs' periods are (%, WideResNet-101's compute time set so; the simulator)",
    f"jobs.0.compute_ms={','.join(map(str, PERIOD_COMPUTE_MS))}", (1,),
    "its snapshot 1's jobs iterate in 295 and 294 ms under fair sharing (Table 3.1); at the compute times that "
    "implies, our profiles' bytes give periods 7% apart")


def score(run) -> float | None:
    """Cassini's score of its first decision's chosen candidate (None: it logged none)."""
    for d in run.decisions:
        log = d.get("log", {})
        if log.get("candidates"):
            return log["candidates"][log["chosen"]]["score"]
    return None


def shifts_ms(run) -> dict[str, float]:
    """Each job's shift, ms (a snapshot's jobs all start at once: one decision shifts them)."""
    return {s["job"]: s["shift_s"] * 1e3 for s in logged_shifts(run)}


def comm_gains(unshifted, shifted) -> dict[str, float | None]:
    """Per job, its mean communication time in the run without the shifts over the run with them."""
    before, after = ({j.job: j.comm_mean_s for j in run.summary.jobs} for run in (unshifted, shifted))
    return {job: (a / after[job] if a and after.get(job) else None) for job, a in before.items()}


def mean_gain(gains: dict[str, float | None]) -> float | None:
    values = [g for g in gains.values() if g is not None]
    return statistics.fmean(values) if values else None


class CassiniTable43(Reproduction):
    name = "cassini-table4.3"
    paper = "Cassini"
    source = SOURCE
    claim = ("on five snapshots of jobs sharing a link, Cassini's gain in communication time over Themis shrinks "
             "with the compatibility score and is nearly gone at 0.6 (scores 1.0, 1.0, 0.9, 0.8, 0.6)")
    setup = ("its testbed (A100 GPUs, 50 Gbit/s NICs, DCQCN): five snapshots of 2-3 named models at stated batch "
             "sizes sharing links from the start; Cassini's score and shifts for each, and every job's average "
             "communication time under Themis and Th+Cassini")
    differs = ("each snapshot's jobs as 2-worker rings whose uplink, 50 Gbit/s at scale 1000, they share (TCP CUBIC "
               "with ECN); our profiles' gradient bytes, and the thesis's compute times where its Table 3.1 "
               "implies them (snapshots 1, 2 and 5), ours elsewhere; 30 iterations")
    backends = ("emu", "sim")
    minutes = 7.0

    def configs(self):
        """Per snapshot, the config that runs it."""
        from experiment.config.overrides import apply_settings
        from reproduce.runs import load

        base = load(CONFIG)
        return [(s, apply_settings(base, s.settings())) for s in SNAPSHOTS]

    def check(self, backend: str) -> str:
        from reproduce.runs import check_config

        checked = [check_config(cfg, backend) for _, cfg in self.configs()]
        return (f"{CONFIG}, {len(checked)} snapshots: {checked[0]}; the score swept over {len(QUANTA_MS)} grids "
                f"on the simulator")

    def run(self, ctx: Context) -> Outcome:
        from reproduce.runs import run_config, trust_note

        configs = self.configs()
        figures, notes, run_dirs, ours = [], [], [], {}
        for snap, cfg in configs:
            out = run_config(cfg, ctx, f"snapshot{snap.index}")
            run_dirs.append(out.run_dir)
            gains, got = comm_gains(out.runs[UNSHIFTED], out.runs[SHIFTED]), score(out.runs[SHIFTED])
            ours[snap.index] = (got, mean_gain(gains))
            figures += [Figure(f"Cassini's score, snapshot {snap.index}", got, (snap.score,) * 2, SOURCE),
                        Figure(f"communication time, Themis over Th+Cassini, snapshot {snap.index} (mean over its "
                               f"jobs)", ours[snap.index][1], (round(snap.gain, 3),) * 2, SOURCE, "x")]
            shifts = shifts_ms(out.runs[SHIFTED])
            notes.append(f"snapshot {snap.index}: " + "; ".join(
                f"{j.name} (compute {_compute(j)}): {_x(gains.get(j.name))} (the thesis's {j.gain:.2f}), shift "
                f"{number_text(shifts.get(j.name))} ms (the thesis's {number_text(s)} ms)"
                for j, s in zip(snap.jobs, snap.shifts_ms, strict=True)))
            trust = trust_note(out, f"snapshot {snap.index}")
            if trust:
                notes.append(trust)
        explanation, sweep_dirs, per_quantum = self.explain(ctx, configs, figures[0])
        periods, period_dirs = self.explain_periods(ctx, configs[0][1], figures[1])
        notes.append("Cassini's score and the mean gain per grid, snapshot by snapshot (simulator): " + per_quantum)
        notes.append("a job's compute time is Table 3.1's iteration time of the same job under fair sharing less its "
                     "communication time under Themis, where Table 3.1 has the job; the thesis does not say how its "
                     "batch sizes divide among workers, so shifts in ms compare only as a share of each period")
        xs = tuple(f"S{s.index}" for s in SNAPSHOTS)
        plot = draw(ctx.path("reproduction.png"), f"Cassini {SOURCE} ({ctx.backend}): snapshots", (
            Panel("Cassini's compatibility score", "snapshot", "score",
                  (Series("ours", xs, tuple(ours[s.index][0] for s in SNAPSHOTS)),),
                  tuple(PaperMark(x, s.score, s.score) for x, s in zip(xs, SNAPSHOTS, strict=True)), bars=True),
            Panel("communication time, Themis over Th+Cassini", "snapshot", "gain (mean over the jobs)",
                  (Series("ours", xs, tuple(ours[s.index][1] for s in SNAPSHOTS)),),
                  tuple(PaperMark(x, round(s.gain, 3), round(s.gain, 3)) for x, s in zip(xs, SNAPSHOTS, strict=True)),
                  bars=True),
            Panel("the score's gap, swept (simulator)", "iteration-time grid (ms)", "snapshot 1's score",
                  (Series("ours", *zip(*explanation.points, strict=True)),), levels=(("paper", explanation.target),)),
            Panel("the gain's gap, swept (simulator)", "snapshot 1's periods apart (%)", "snapshot 1's gain",
                  (Series("ours", *zip(*periods.points, strict=True)),), levels=(("paper", periods.target),))))
        return Outcome(tuple(figures), tuple(notes), (*run_dirs, *sweep_dirs, *period_dirs), plot,
                       (explanation, periods))

    def explain(self, ctx: Context, configs, figure: Figure) -> tuple[Explanation, list[str], str]:
        """Every snapshot of ``configs`` (:meth:`configs`) on the simulator at each grid of
        :data:`QUANTA_MS`: the explanation of snapshot 1's score, the runs' directories, and every
        snapshot's score and gain in words."""
        from experiment.config.overrides import apply_settings
        from reproduce.runs import run_config

        sim = dataclasses.replace(ctx, backend="sim")
        by_quantum, dirs = {}, []
        for q in QUANTA_MS:
            for snap, cfg in configs:
                shifted = f"{SHIFTED},quantum_ms={q}"
                out = run_config(apply_settings(cfg, [f'policies=[{UNSHIFTED}, "{shifted}"]']), sim,
                                 f"sensitivity/quantum_ms={q}/snapshot{snap.index}")
                dirs.append(out.run_dir)
                by_quantum.setdefault(q, {})[snap.index] = (
                    score(out.runs[shifted]), mean_gain(comm_gains(out.runs[UNSHIFTED], out.runs[shifted])))
        points = tuple((float(q), by_quantum[q][1][0]) for q in QUANTA_MS)
        words = "; ".join(f"{q} ms: " + ", ".join(f"S{i} {_x(s, '.2f', '')}/{_x(g)}" for i, (s, g) in v.items())
                          for q, v in by_quantum.items())
        return Explanation(QUANTUM, figure.nearest_end, points), dirs, words

    def explain_periods(self, ctx: Context, cfg, figure: Figure) -> tuple[Explanation, list[str]]:
        """Snapshot 1 (its config ``cfg``) on the simulator with its first job's compute time at each of
        :data:`PERIOD_COMPUTE_MS`: its gain against how far apart Cassini profiled the two periods."""
        from experiment.config.overrides import apply_settings
        from reproduce.runs import run_config

        sim = dataclasses.replace(ctx, backend="sim")
        points, dirs = [], []
        for ms in PERIOD_COMPUTE_MS:
            out = run_config(apply_settings(cfg, [f"jobs.0.compute_ms={ms}"]), sim,
                             f"sensitivity/periods/compute_ms={ms}")
            dirs.append(out.run_dir)
            periods = [s["period_s"] for s in logged_shifts(out.runs[SHIFTED])]
            apart = 100 * (1 - min(periods) / max(periods)) if periods else None
            points.append((apart, mean_gain(comm_gains(out.runs[UNSHIFTED], out.runs[SHIFTED]))))
        return Explanation(PERIODS, figure.nearest_end, tuple(points)), dirs


def _compute(job: SnapshotJob) -> str:
    return f"{job.compute_ms:g} ms" if job.compute_ms else "our profile's"


def _x(v: float | None, fmt: str = ".2f", unit: str = "x") -> str:
    return "-" if v is None else f"{v:{fmt}}{unit}"
