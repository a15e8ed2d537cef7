"""The experiment loop over its back ends: the waves scheduler, the simulator back end (against the
batch simulator, with arrivals and preemption), the package's import hygiene, and
``run_testbed.py --backend sim``."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from backend.protocol import ExperimentJob
from common.errors import ConfigError, JobError, PlacementError
from experiment import make_backend
from experiment.config.schema import ExperimentConfig, JobConfig, TopologyConfig, load, validate
from experiment.config.workload import experiment_jobs
from experiment.run.driver import run_experiment
from experiment.run.durations import DurationBackend, duration_job, run_durations
from experiment.run.loop import NeverPlaced, run_loop
from experiment.run.policy import place_and_run
from experiment.run.simrun import sim_backend, sim_options
from jobs.models import get_model, scaled_buckets
from measure.shaping import virtual_rates_mbps
from placement import make_policy
from placement.base import Cluster, MachineInfo
from scheduling import make_scheduler
from sim.backend import FlowSimBackend
from sim.flowsim import SimJob, simulate


def small_cfg(free_machines: int = 4, **changes) -> ExperimentConfig:
    """``free_machines`` machines of 2 GPUs free on a k=4 fat-tree (the others busy), three jobs."""
    busy = {f"h{i}": 2 for i in range(free_machines + 1, 17)}
    cfg = ExperimentConfig(
        name="loop", topology=TopologyConfig("fat_tree", {"k": 4, "gpus_per_machine": 2}), background=busy,
        jobs=(JobConfig("a", "resnet50", 4, "ring"), JobConfig("b", "vgg16", 4, "hd"),
              JobConfig("c", "resnet50", 2, "ring", arrival_s=0.5)),
        policies=("consolidate",), iterations=4, warmup_iterations=1)
    return dataclasses.replace(cfg, **changes)


def test_waves_start_together_and_wait_for_the_whole_wave():
    """``waves``: a and b (4 of 4 GPUs) start at 0; c waits for the whole wave (until a ends at 10),
    not for the first job of it to end (b at 5), as the static experiments run."""
    jobs = [duration_job("a", 2, 10), duration_job("b", 2, 5), duration_job("c", 2, 1)]
    waves = run_durations(jobs, make_scheduler("waves"), total_gpus=4)
    fifo = run_durations(jobs, make_scheduler("fifo"), total_gpus=4)
    assert [(s.time_s, s.job) for s in waves.starts] == [(0, "a"), (0, "b"), (10, "c")]
    assert waves.jct_s == {"a": 10, "b": 5, "c": 11}
    assert fifo.jct_s["c"] == 6, "fifo backfills c as soon as b's GPUs are free"
    assert waves.preemptions == fifo.preemptions == 0


def test_a_placer_that_never_places_is_a_placement_error():
    """Nothing runs, nothing arrives: the loop names the jobs instead of waiting for ever (EF rounds
    12 workers up to 16 GPUs, more than the 12 there are)."""
    cluster = Cluster([MachineInfo(f"m{i}", 4, rack="r0", pod="p0") for i in range(3)])
    with pytest.raises(NeverPlaced, match=r"waiting jobs \['a'\] would wait for ever") as info:
        run_loop([duration_job("a", 12, 5)], make_scheduler("waves"), DurationBackend(), cluster=cluster,
                 policy=make_policy("elasticflow"))
    assert isinstance(info.value, PlacementError) and info.value.jobs == ("a",)


def test_simulator_back_end_agrees_with_the_batch_simulator_on_each_wave():
    """With ``waves`` every wave's jobs start together: each job's times in the loop equal the batch
    simulator's (:func:`sim.flowsim.simulate`) for that wave's jobs on the same placements."""
    cfg = small_cfg(jobs=small_cfg().jobs[:2] + (JobConfig("c", "resnet50", 2, "ring"),))
    g = validate(cfg, backend="sim")
    backend = sim_backend(cfg, g)
    loop = place_and_run(cfg, g, "consolidate", backend)
    waves: dict[float, list] = {}
    for s in loop.starts:
        waves.setdefault(s.time_s, []).append(s)
    assert len(waves) == 2, "a and b fill the 8 free GPUs; c runs in a second wave"
    for starts in waves.values():
        sim_jobs = []
        for s in starts:
            j = next(x for x in cfg.jobs if x.name == s.job)
            model = get_model(j.model)
            sim_jobs.append(SimJob(j.name, tuple(sl.machine for sl in s.placement.slots), j.collective,
                                   tuple(scaled_buckets(model, cfg.scale)), model.compute_time_s, cfg.iterations,
                                   cfg.warmup_iterations))
        batch = simulate(g, virtual_rates_mbps(g, cfg.scale), sim_jobs, sim_options(cfg, g))
        for s in starts:
            got, want = backend.estimate(s.job), batch.job(s.job)
            assert got.comm_mean_s == pytest.approx(want.comm_mean_s, rel=1e-9)
            assert got.iterations == want.iterations == cfg.iterations
            assert loop.jct_s[s.job] == pytest.approx(s.time_s + want.finish_s, rel=1e-9)
    assert min(backend.estimate("a").comm_mean_s, backend.estimate("b").comm_mean_s) > 0


def test_arrival_and_preemption_on_the_simulator():
    """Tiresias with a tiny first queue: a (arrived at 0) is demoted after 1 GPU-second; b arrives
    at 1 s and preempts it; each job still completes exactly its iterations, over two runs or more,
    iteration numbers continuing across runs."""
    cfg = small_cfg(2, jobs=(JobConfig("a", "resnet50", 4, "ring"), JobConfig("b", "resnet50", 4, "ring", 1.0)),
                    scheduler="tiresias,thresholds_gpu_s=1", iterations=6)
    g = validate(cfg, backend="sim")
    backend = sim_backend(cfg, g)
    loop = place_and_run(cfg, g, "consolidate", backend)
    b_start = next(s.time_s for s in loop.starts if s.job == "b")
    assert b_start == pytest.approx(1.0), "b starts on arrival, preempting a"
    assert loop.preemptions >= 1
    a_runs = [r for r in loop.runs if r.job == "a"]
    assert len(a_runs) >= 2 and not a_runs[0].finished and a_runs[-1].finished
    assert a_runs[0].end_s == pytest.approx(1.0) and 1 <= a_runs[0].iterations_done < cfg.iterations
    for job in ("a", "b"):
        runs = [r for r in loop.runs if r.job == job]
        assert sum(r.iterations_done for r in runs) == cfg.iterations
        recs = backend.records[job]
        assert sorted({r.iteration for r in recs}) == list(range(cfg.iterations))
        assert len(recs) == cfg.iterations * 4, "one record per rank and iteration, the lost partial ones dropped"
    alone = place_and_run(dataclasses.replace(cfg, jobs=cfg.jobs[:1]), g, "consolidate",
                          sim_backend(cfg, g))
    assert loop.jct_s["a"] > alone.jct_s["a"], "a preempted finishes later than alone"


def test_simulator_needs_placements_and_iterations():
    g = validate(small_cfg(), backend="sim")
    backend = FlowSimBackend(g, virtual_rates_mbps(g, 500), 500)
    with pytest.raises(JobError, match="runs placed jobs only"):
        backend.start([(ExperimentJob("a", 2, iterations=3), None)])
    with pytest.raises(JobError, match="give its work as iterations or duration_s"):
        ExperimentJob("a", 2)


def test_experiment_jobs_carry_the_config():
    cfg = small_cfg()
    jobs = experiment_jobs(cfg)
    assert [(j.name, j.workers, j.arrival_s, j.model, j.collective, j.iterations) for j in jobs] == [
        ("a", 4, 0.0, "resnet50", "ring", 4), ("b", 4, 0.0, "vgg16", "hd", 4), ("c", 2, 0.5, "resnet50", "ring", 4)]


def test_scheduler_spec_is_validated():
    with pytest.raises(ConfigError, match=r"config.scheduler: unknown scheduler 'nope'.*waves"):
        validate(small_cfg(scheduler="nope"))
    with pytest.raises(ConfigError, match="config.scheduler: 'fifo,' is not a valid scheduler spec"):
        validate(small_cfg(scheduler="fifo,"))


def test_simulated_run_writes_results_and_a_table(tmp_path, capsys):
    """The simulated run of a config through the driver: per policy placements.json and summary.json,
    the CSVs, the summary and the plot, a table on the terminal, status complete."""
    cfg = small_cfg(policies=("consolidate", "spread"), results_dir=str(tmp_path))
    run_dir = run_experiment(cfg, make_backend("sim"))
    out = capsys.readouterr().out
    assert "consolidate" in out and "comm mean s" in out
    assert json.loads(Path(run_dir, "status.json").read_text())["status"] == "complete"
    assert json.loads(Path(run_dir, "capabilities.json").read_text())["backend"] == "sim"
    rows = list(csv.DictReader(open(os.path.join(run_dir, "jobs.csv"), encoding="utf-8")))
    assert sorted((r["policy"], r["job"]) for r in rows) == sorted(
        (p, j) for p in ("consolidate", "spread") for j in ("a", "b", "c"))
    summary = json.loads(Path(run_dir, "summary.json").read_text())
    jobs = json.loads(Path(run_dir, "consolidate", "summary.json").read_text())["jobs"]
    assert summary["policies"][0]["jct_mean_s"] == pytest.approx(sum(j["jct_s"] for j in jobs.values()) / 3)
    assert Path(run_dir, "policies.png").stat().st_size > 1000


def test_backend_sim_runs_without_an_emulator(tmp_path):
    """``run_testbed.py --backend sim``: the default experiment runs on the simulator and never loads
    Mininet or os-ken; the experiment package, the loop and the simulator back end import neither."""
    code = ("import sys, runpy; sys.argv = ['run_testbed.py', '--backend', 'sim', '--results', sys.argv[1], "
            "'--iterations', '3'];\n"
            "import run_testbed\ncode = run_testbed.main()\n"
            "bad = [m for m in ('mininet', 'os_ken', 'torch') if m in sys.modules]\n"
            "print('LOADED', bad); sys.exit(code)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "LOADED []" in out.stdout
    assert "titan" in out.stdout and "results:" in out.stdout
    (run_dir,) = tmp_path.iterdir()
    assert json.loads((run_dir / "status.json").read_text())["status"] == "complete"


def test_backend_sim_bad_config_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    text = (REPO / "experiments" / "default.yaml").read_text().replace("scheduler: waves", "scheduler: fifo,,")
    bad.write_text(text)
    out = subprocess.run([sys.executable, "run_testbed.py", "--backend", "sim", "-c", str(bad), "--results",
                          str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "config.scheduler" in out.stderr, out.stderr


def test_default_config_validates_for_both_back_ends():
    cfg = load(str(REPO / "experiments" / "default.yaml"))
    assert cfg.scheduler == "waves"
    assert validate(cfg).number_of_nodes() == validate(cfg, backend="sim").number_of_nodes()


def test_experiment_package_imports_no_emulator():
    """The experiment package (config, loop, back-end protocol, results, the simulated run, the run's
    records, report, export and estimates) and the simulator back end load neither Mininet, os-ken nor
    torch, nor the emulator's network, back end and runner."""
    modules = ("experiment", "backend.protocol", "experiment.run.loop", "experiment.run.durations",
               "experiment.run.policy", "experiment.run.simrun", "experiment.reporting.results",
               "experiment.config.schema", "experiment.config.rules", "experiment.config.file",
               "experiment.config.workload", "experiment.reporting.validation", "experiment.reporting.measurements",
               "experiment.reporting.report", "experiment.reporting.export", "experiment.validate.estimates",
               "sim.backend",
               # what experiment.reporting.report imports inside its functions
               "measure.fidelity", "measure.linkstats")
    code = (f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
            "bad = [m for m in ('mininet', 'os_ken', 'torch', 'emulator.net', 'emulator.backend', 'emulator.runner',"
            " 'emulator.controller_proc') if m in sys.modules]\nprint(bad)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_jobs_package_does_not_import_placement():
    """``jobs/`` (the workers' side) names what it reads of jobs and placements itself: no import of
    ``placement`` anywhere in it, not even for type checking."""
    import ast

    offenders = []
    for path in sorted((REPO / "jobs").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.name}: {n}" for n in names if n == "placement" or n.startswith("placement.")]
    assert offenders == []


def test_resimulating_a_schedule_reproduces_it():
    """Re-simulating a simulated run's own schedule (arrival, preemptions, restarts) through the loop gives
    the same estimate of every job: that is how an emulated run with an online scheduler is validated."""
    from experiment.run.resimulate import simulate_schedule

    cfg = small_cfg(2, jobs=(JobConfig("a", "resnet50", 4, "ring"), JobConfig("b", "vgg16", 4, "hd", 1.0)),
                    scheduler="tiresias,thresholds_gpu_s=1", iterations=5)
    g = validate(cfg, backend="sim")
    backend = sim_backend(cfg, g)
    loop = place_and_run(cfg, g, "consolidate", backend)
    assert loop.preemptions >= 1
    replayed = simulate_schedule(cfg, g, loop)
    assert sorted(replayed) == ["a", "b"]
    for job in ("a", "b"):
        want = backend.estimate(job)
        assert replayed[job].comm_mean_s == pytest.approx(want.comm_mean_s, rel=1e-9)
        assert replayed[job].iterations == want.iterations == cfg.iterations


def test_arrivals_count_in_the_wall_time_bound():
    """A job arriving at 1000 s cannot end before 1000 s: with dilation 3 the emulator needs at least
    3000 s of wall time per policy, which a one-hour limit rejects for two policies."""
    from experiment.config.schema import wall_time_lower_bound_s

    cfg = small_cfg(jobs=(JobConfig("a", "resnet50", 2), JobConfig("late", "resnet50", 2, arrival_s=1000.0)),
                    policies=("consolidate", "spread"), dilation=3.0)
    iterations_s = (cfg.warmup_iterations + cfg.iterations) * get_model("resnet50").compute_time_s
    assert wall_time_lower_bound_s(cfg) == pytest.approx(2 * (1000.0 + iterations_s) * 3.0)
    with pytest.raises(ConfigError, match=r"job 'late' arriving at 1000 s"):
        validate(cfg)
    assert validate(cfg, backend="sim") is not None, "the simulator has no wall-time limit"
