"""Titan's motivating example (Titan paper Fig. 1, §5.1; ``docs/resolutions.md`` Titan §5.1).

Four machines of four GPUs with 4, 3, 2 and 1 GPUs free and one 4-worker halving-doubling job
of M bytes per allreduce. The paper: ElasticFlow packs it on the idle machine (4 machines in
use, no cross-machine traffic), HiveD fills fragments first (3 machines, 3M/2), Titan splits it
along its pattern (3 machines, M): 33.3% less traffic than HiveD, 25% fewer machines than
ElasticFlow. Traffic is counted as the spec does, a symmetric exchange once.

On the emulator the cross-machine traffic is measured (bytes the machines sent, halved for the
spec's accounting, per allreduce, over the payload a full frame carries); on the simulator, which
does not count bytes, it is the pattern's traffic on the placement the policy chose
(:func:`placement.titan_patterns.cross_traffic_bytes`, the gloo partner order the testbed runs).
"""

from __future__ import annotations

from reproduce.base import Context, Figure, Outcome, Reproduction, number_text
from reproduce.plot import Panel, PaperMark, Series, draw

CONFIG = "reproduce/configs/titan_fig1.yaml"
SOURCE = "Fig. 1, §5.1"
PAPER = {  # policy -> (machines of the cluster in use, cross-machine traffic per allreduce in M)
    "elasticflow": (4, 0.0),
    "hived": (3, 1.5),
    "titan": (3, 1.0),
}
NAMES = {"elasticflow": "ElasticFlow", "hived": "HiveD", "titan": "Titan"}
WIRE_PER_PAYLOAD = 1514 / 1448  # frame bytes per payload byte of a full TCP segment at MTU 1500


def cross_traffic_m(placement: dict, collective: str) -> float:
    """The job's cross-machine traffic per allreduce in units of M on ``placement`` (a
    ``placements.json`` entry: GPU slots in rank order), the spec's accounting."""
    from placement.titan_patterns import comm_pattern, cross_traffic_bytes

    machines = [machine for machine, _ in placement["slots"]]
    return cross_traffic_bytes(comm_pattern(collective, len(machines), 1.0), machines)


def figures(machines_in_use: dict[str, int], traffic_m: dict[str, float]) -> tuple[Figure, ...]:
    """Ours beside the paper's: machines in use and traffic per policy, then the two reductions."""
    out = [Figure(f"machines in use, {NAMES[p]}", machines_in_use.get(p), (PAPER[p][0],) * 2, SOURCE, "machines")
           for p in PAPER]
    out += [Figure(f"cross-machine traffic per allreduce, {NAMES[p]}", traffic_m.get(p), (PAPER[p][1],) * 2, SOURCE,
                   "M") for p in PAPER]
    traffic_cut = (100.0 * (1 - traffic_m["titan"] / traffic_m["hived"])
                   if traffic_m.get("hived") and "titan" in traffic_m else None)
    machine_cut = (100.0 * (1 - machines_in_use["titan"] / machines_in_use["elasticflow"])
                   if machines_in_use.get("elasticflow") and "titan" in machines_in_use else None)
    out.append(Figure("Titan's traffic reduction against HiveD", traffic_cut, (100 / 3,) * 2, SOURCE, "%"))
    out.append(Figure("Titan's machine reduction against ElasticFlow", machine_cut, (25.0,) * 2, SOURCE, "%"))
    return tuple(out)


class TitanFig1(Reproduction):
    name = "titan-fig1"
    paper = "Titan"
    source = SOURCE
    claim = ("ElasticFlow packs the job on the idle machine, HiveD fills fragments with 3M/2 of traffic, Titan "
             "splits it with M: 33.3% less traffic than HiveD, 25% fewer machines than ElasticFlow")
    backends = ("sim", "emu")
    setup = ("its worked example: machines of 4 GPUs with 4, 3, 2 and 1 free and one 4-worker "
             "halving-doubling job; machines used and cross-machine traffic in units of the model's size M")
    minutes = 0.1

    def check(self, backend: str) -> str:
        from reproduce.runs import check_config, load

        return f"{CONFIG}: {check_config(load(CONFIG), backend)}"

    def run(self, ctx: Context) -> Outcome:
        from jobs.models import get_model, scaled_buckets
        from reproduce.runs import load, run_config

        cfg = load(CONFIG)
        out = run_config(cfg, ctx, "run")
        (job,) = cfg.jobs
        m_bytes = sum(scaled_buckets(get_model(job.model), cfg.scale))
        allreduces = cfg.iterations + cfg.warmup_iterations
        in_use, traffic, measured = {}, {}, []
        for policy, run in out.runs.items():
            s = run.summary
            in_use[policy] = s.cluster_machines_in_use
            if s.emulated.cross_machine_bytes is not None:
                # bytes leaving machines count both directions of every exchange: halved for the spec's accounting
                traffic[policy] = s.emulated.cross_machine_bytes / 2 / allreduces / WIRE_PER_PAYLOAD / m_bytes
                measured.append(policy)
            else:
                (placed,) = [p for p in run.placements if p["job"] == job.name]
                traffic[policy] = cross_traffic_m(placed, job.collective)
        how = ("measured: bytes the machines sent, halved, per allreduce, over the payload of full frames"
               if measured else "the pattern's traffic on each policy's placement (the simulator counts no bytes)")
        notes = (f"M = {m_bytes:,} bytes ({job.model}'s gradients at scale {cfg.scale:g}); traffic is {how}",)
        plot = draw(ctx.path("reproduction.png"), f"Titan {SOURCE}: ours ({ctx.backend}) beside the paper's", (
            Panel("machines in use", "policy", "machines", (Series("ours", tuple(NAMES[p] for p in PAPER),
                                                                  tuple(in_use.get(p) for p in PAPER)),),
                  tuple(PaperMark(NAMES[p], v[0], v[0]) for p, v in PAPER.items()), bars=True),
            Panel("cross-machine traffic per allreduce", "policy", "traffic (M)",
                  (Series("ours", tuple(NAMES[p] for p in PAPER), tuple(traffic.get(p) for p in PAPER)),),
                  tuple(PaperMark(NAMES[p], v[1], v[1]) for p, v in PAPER.items()), bars=True)))
        return Outcome(figures(in_use, traffic), notes, (out.run_dir,), plot)


# -- Titan's large-scale simulation (Exp#1-#4, Figs. 2 and 4-6) -----------------------------------------------

SIM_CONFIG = "experiments/titan_sim.yaml"
SIM_POLICIES = ("titan", "elasticflow", "hived", "tiresias")
SIM_NAMES = {**NAMES, "tiresias": "Tiresias"}
SIM_PAPER = {  # metric -> policy -> the paper's mean over its trace (docs/resolutions.md Titan §4.3)
    "used_machines_mean": {"titan": 174.0, "hived": 168.0, "elasticflow": 334.0, "tiresias": 207.0},  # Fig. 2(a)
    "fragmentation_rate_mean": {"titan": 0.117, "hived": 0.10, "elasticflow": 0.381, "tiresias": 0.194},  # Fig. 4(b)
    "comm_overhead_gb_mean": {"titan": 1.65, "tiresias": 2.78, "hived": 7.03},  # Fig. 5(a); ElasticFlow's not given
    "profit_rate_mean": {"titan": 314.0, "elasticflow": 256.0, "tiresias": 71.0, "hived": 24.0},  # Fig. 6(b)
}
SIM_METRICS = {"used_machines_mean": ("used machines", "Fig. 2(a), Exp#1"),
               "fragmentation_rate_mean": ("fragmentation rate", "Fig. 4(b), Exp#2"),
               "comm_overhead_gb_mean": ("communication overhead", "Fig. 5(a), Exp#3"),
               "profit_rate_mean": ("profit rate", "Fig. 6(b), Exp#4")}


def titan_over(metric: str, figures: dict) -> dict[str, float | None]:
    """Each other policy's mean ``metric`` over Titan's (None where either is missing or Titan's is 0):
    how the paper's claims compare policies (its absolute profit rates cannot come out of its formula)."""
    titan = figures.get("titan", {}).get(metric)
    return {p: None if not titan or figures.get(p, {}).get(metric) is None else figures[p][metric] / titan
            for p in SIM_POLICIES if p != "titan"}


class TitanSim(Reproduction):
    name = "titan-sim"
    paper = "Titan"
    source = "Figs. 2 and 4-6, Exp#1-#4"
    claim = ("Titan uses 47.9% fewer machines than ElasticFlow and 15.9% fewer than Tiresias (4% more than HiveD), "
             "keeps fragmentation low (11.7% against ElasticFlow's 38.1%), cuts communication overhead 40.6% and "
             "76.4% against Tiresias and HiveD and raises the profit rate 22.7%, 3.42x and 12x against ElasticFlow, "
             "Tiresias and HiveD")
    setup = ("its simulator: 64 racks of 8 machines with 8 GPUs, 100 Gbit/s, halving-doubling allreduce, a "
             "2-month Microsoft trace of 10 ITP clusters (69,742 jobs) replayed at its submission times, random "
             "models; the metrics sampled at each arrival and averaged")
    differs = ("the public release of that trace (69,351 jobs); jobs that do not fit wait in FIFO order (the paper "
               "does not say); a non-blocking leaf-spine for the fat-tree; models drawn from ResNet-50, VGG-16 and "
               "BERT-base (the paper names none)")
    minutes = 28.0

    def check(self, backend: str) -> str:
        from reproduce.runs import check_config, load

        return f"{SIM_CONFIG}: {check_config(load(SIM_CONFIG), backend)}"

    def run(self, ctx: Context) -> Outcome:
        import dataclasses

        from reproduce.runs import load, run_config

        out = run_config(load(SIM_CONFIG), ctx, "run")
        figures = {p: dataclasses.asdict(run.summary.cluster) for p, run in out.runs.items()
                   if run.summary.cluster is not None}
        ours = {m: titan_over(m, figures) for m in SIM_METRICS}
        paper = {m: {p: v / SIM_PAPER[m]["titan"] for p, v in SIM_PAPER[m].items() if p != "titan"}
                 for m in SIM_METRICS}
        rows = []
        for metric, (what, source) in SIM_METRICS.items():
            for p in SIM_POLICIES[1:]:
                if p in paper[metric]:
                    rows.append(Figure(f"{what}, {SIM_NAMES[p]} over Titan", ours[metric].get(p),
                                       (paper[metric][p],) * 2, source, "x"))
        titan = figures.get("titan", {})
        rows.append(Figure("used machines, Titan", titan.get("used_machines_mean"), (174.0, 174.0),
                           SIM_METRICS["used_machines_mean"][1], "machines"))
        rows.append(Figure("fragmentation rate, Titan", titan.get("fragmentation_rate_mean"), (0.117, 0.117),
                           SIM_METRICS["fragmentation_rate_mean"][1]))
        names = tuple(SIM_NAMES[p] for p in SIM_POLICIES[1:])
        plot = draw(ctx.path("reproduction.png"), "Titan's simulation: each policy over Titan, ours and the paper's",
                    tuple(Panel(f"{what} over Titan's", "policy", "ratio",
                                (Series("ours", names, tuple(ours[m].get(p) for p in SIM_POLICIES[1:])),),
                                tuple(PaperMark(SIM_NAMES[p], v, v) for p, v in paper[m].items()), bars=True)
                          for m, (what, _) in SIM_METRICS.items()))
        means = "; ".join(f"{SIM_NAMES[p]}: " + ", ".join(f"{SIM_METRICS[m][0]} {number_text(f.get(m))}"
                                                          for m in SIM_METRICS)
                          for p, f in figures.items())
        notes = (f"ours, means over the arrivals: {means} (communication overhead in GB)",
                 "each policy's figure over Titan's, as the paper's claims compare them; the paper's profit rates "
                 "(314, 256, 71, 24) cannot come out of its own formula, so only ratios compare "
                 "(docs/resolutions.md Titan §4.3)",
                 f"every arrival's sample: {out.run_dir}/<policy>/cluster.csv, cluster.png")
        return Outcome(tuple(rows), notes, (out.run_dir,), plot)


# -- Titan's testbed (Exp#5-#7, Figs. 8-11) -----------------------------------------------------------------

TESTBED_CONFIG = "reproduce/configs/titan_testbed.yaml"
TESTBED_SIZES = (4, 6, 8, 10, 12)
TESTBED_MODELS = ("resnet50", "vgg16")  # the paper's panels (a) and (b)
TESTBED_PAPER = {  # (figure, model, workers) -> policy -> the paper's value over Titan's
    ("machine hours", "vgg16", 8): {"elasticflow": 11.11 / 8.67, "tiresias": 11.12 / 8.67, "hived": 12.33 / 8.67},
    ("communication time per epoch", "vgg16", 8): {"elasticflow": 8.4 / 8.7, "tiresias": 8.3 / 8.7,
                                                   "hived": 12.0 / 8.7},
    ("training throughput", "resnet50", 12): {"elasticflow": 4422 / 4389, "tiresias": 4208 / 4389,
                                              "hived": 2610 / 4389},
}
TESTBED_SOURCES = {"machine hours": "Fig. 9(b), Exp#5", "communication time per epoch": "Fig. 11(b), Exp#7",
                   "training throughput": "Fig. 10(a), Exp#6"}


def testbed_figures(run) -> dict[str, float | None]:
    """A policy's testbed figures from its summary: machine hours (M2), communication time and
    iteration time per iteration of its one job (per epoch and throughput are these times the
    iterations of an epoch, the same for every policy), and idle machines its job took."""
    s = run.summary
    (job,) = s.jobs
    return {"machine hours": s.cluster.machine_hours if s.cluster is not None else None,
            "communication time per epoch": job.comm_mean_s,
            "training throughput": 1.0 / job.iteration_mean_s if job.iteration_mean_s else None,
            "machines": float(len(job.machines)), "idle machines taken": float(s.idle_machines_used)}


class TitanTestbed(Reproduction):
    name = "titan-testbed"
    paper = "Titan"
    source = "Figs. 8-11, Exp#5-#7"
    claim = ("on its testbed Titan cuts machine hours by 21.9%, 22% and 29.7% against ElasticFlow, Tiresias and "
             "HiveD at 8 workers, reaches 99.3% of the best throughput at 12 workers and a per-epoch communication "
             "time within 5% of the lowest (8.7 s against 8.4 and 8.3; HiveD 12 s)")
    setup = ("8 servers of 4 Docker-container GPUs behind one 100 Gbit/s switch, 0-3 background jobs per server, "
             "ResNet-50 and VGG-16 trained with halving-doubling allreduce over gloo, 4-12 workers under Titan, "
             "ElasticFlow, Tiresias and HiveD")
    differs = ("the background pattern (only drawn in its Fig. 8) is the spec's reading, 3, 3, 3, 2, 2, 1, 0, 0 GPUs "
               "busy, under which ElasticFlow and Tiresias cannot place 10 or 12 workers; the models' gradients "
               "replayed at their profiles' compute times (no CIFAR-100 training); times per iteration, so per "
               "epoch and throughput compare as ratios")
    backends = ("emu", "sim")
    minutes = 14.0

    def configs(self) -> dict[tuple[str, int], object]:
        """The testbed's config per model and job size."""
        import dataclasses

        from reproduce.runs import load

        base = load(TESTBED_CONFIG)
        (job,) = base.jobs
        return {(m, w): dataclasses.replace(base, name=f"{base.name}-{m}-{w}",
                                            jobs=(dataclasses.replace(job, model=m, workers=w),))
                for m in TESTBED_MODELS for w in TESTBED_SIZES}

    def check(self, backend: str) -> str:
        from reproduce.runs import check_config

        configs = self.configs()
        for cfg in configs.values():
            check_config(cfg, backend)
        return (f"{TESTBED_CONFIG}: {len(configs)} runs ({', '.join(TESTBED_MODELS)} at "
                f"{', '.join(map(str, TESTBED_SIZES))} workers) of {', '.join(SIM_POLICIES)}")

    def run(self, ctx: Context) -> Outcome:
        from reproduce.runs import run_config, trust_note

        configs = self.configs()
        got: dict[tuple[str, int], dict[str, dict]] = {}
        notes = []
        for (model, workers), cfg in configs.items():
            out = run_config(cfg, ctx, f"{model}-{workers}", incomplete_ok=True)
            got[(model, workers)] = {p: testbed_figures(run) for p, run in out.runs.items()}
            if out.unplaced:
                notes.append(f"{model} at {workers} workers: {', '.join(out.unplaced)} could not place the job")
            trust = trust_note(out, f"{model} at {workers} workers")
            if trust:
                notes.append(trust)
        figures = []
        for (what, model, workers), paper in TESTBED_PAPER.items():
            ours = got[(model, workers)]
            titan = ours.get("titan", {}).get(what)
            for p, value in paper.items():
                mine = ours.get(p, {}).get(what)
                figures.append(Figure(f"{what}, {SIM_NAMES[p]} over Titan, {model} at {workers} workers",
                                      None if not titan or mine is None else mine / titan, (value, value),
                                      TESTBED_SOURCES[what], "x"))
        base = configs[("vgg16", 12)]
        idle = base.topology.params["hosts_per_leaf"] - sum(1 for b in base.background.values() if b > 0)
        taken = got[("vgg16", 12)].get("titan", {}).get("idle machines taken")
        figures.append(Figure("idle machines Titan leaves at 12 workers (VGG-16)",
                              None if taken is None else idle - taken, (1.0, 1.0), "Fig. 8, Exp#5", "machines"))
        panels = []
        units = {"machine hours": "machine hours", "communication time per epoch": "communication s per iteration",
                 "training throughput": "iterations per s"}
        for what, unit in units.items():
            for model in TESTBED_MODELS:
                series = tuple(Series(SIM_NAMES[p], TESTBED_SIZES,
                                      tuple(got[(model, w)].get(p, {}).get(what) for w in TESTBED_SIZES))
                               for p in SIM_POLICIES)
                panels.append(Panel(f"{what}, {model}", "workers", unit, series))
        plot = draw(ctx.path("reproduction.png"), f"Titan's testbed, ours ({ctx.backend})", tuple(panels))
        notes = ("each figure is a policy's over Titan's at the paper's point (communication time per iteration "
                 "and iterations per second stand for per epoch and throughput: an epoch is the same iterations "
                 "under every policy); machine hours count every machine in use, background included, while the "
                 "job runs", *notes)
        return Outcome(tuple(figures), tuple(notes), tuple(ctx.path(f"{m}-{w}") for m, w in configs), plot)
