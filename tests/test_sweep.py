"""The simulator sweep (``experiment.run.sweep``, ``run_testbed.py sweep``): parsing, every point validated before
anything runs, the written figures against each point's own simulated run, a process pool giving the same rows,
and the command line's exit codes and one-line errors. Real simulator runs on a 4-machine leaf-spine."""

from __future__ import annotations

import csv
import dataclasses
import fcntl
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys

import pytest
from conftest import CLI, ROOT, needs, run_cli

from common.errors import ConfigError
from experiment.config.schema import ExperimentConfig, JobConfig, TopologyConfig
from experiment.reporting.results import PolicyIncomplete
from experiment.reporting.summary import PolicySummary
from experiment.run.sweep import ROW_COLUMNS, PointResult, run_sweep, sweep_rows, sweep_stats, table_lines
from experiment.run.sweep_spec import Vary, parse_seeds, parse_vary, sweep_points

OVERSUB = ("topology", "oversubscription")
TINY_YAML = """name: tiny
topology: {kind: leaf_spine, n_leaf: 2, n_spine: 1, hosts_per_leaf: 2, gpus_per_machine: 2}
jobs:
  - {name: a, model: resnet50, workers: 2}
  - {name: b, model: small_cnn, workers: 4, arrival_s: 0.1}
  - {name: c, model: resnet50, workers: 2, arrival_s: 0.2}
policies: [consolidate, random]
iterations: 3
warmup_iterations: 1
"""


def _dask_missing() -> str | None:
    """Why Dask's distributed scheduler cannot be imported (requirements.txt installs it), or None."""
    try:
        import distributed  # noqa: F401
    except ImportError as e:
        return f"cannot import distributed: {e}"
    return None


def tiny_cfg(results_dir: str = "results") -> ExperimentConfig:
    """Two leaves of two 2-GPU machines under one spine; b spans both racks, so the uplink's
    oversubscription matters. consolidate ignores the seed, random's placements follow it."""
    return ExperimentConfig(
        name="tiny", topology=TopologyConfig("leaf_spine", {"n_leaf": 2, "n_spine": 1, "hosts_per_leaf": 2,
                                                            "gpus_per_machine": 2}),
        jobs=(JobConfig("a", "resnet50", 2, "ring"), JobConfig("b", "small_cnn", 4, "ring", arrival_s=0.1),
              JobConfig("c", "resnet50", 2, "ring", arrival_s=0.2)),
        policies=("consolidate", "random"), iterations=3, warmup_iterations=1, results_dir=results_dir)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A 2-value x 2-seed sweep of the oversubscription, in this process; its result, directory and lines."""
    run_dir = str(tmp_path_factory.mktemp("sweep"))
    lines: list[str] = []
    result = run_sweep(tiny_cfg(), Vary(OVERSUB, (1, 4)), (1, 2), run_dir, say=lines.append)
    return result, run_dir, lines


def read_csv(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# -- parsing ---------------------------------------------------------------------------------------


def test_parse_vary_reads_values_as_a_config_file_does():
    """Values are YAML scalars of their own types, a YAML list holds values with commas, and 1e3 is a float."""
    v = parse_vary(" topology.oversubscription = 1, 2.5 ,true,abc")
    assert v.path == OVERSUB and v.values == (1, 2.5, True, "abc")
    assert [type(x) for x in v.values] == [int, float, bool, str]
    assert (v.name, v.param) == ("topology.oversubscription", "oversubscription")
    assert v.label(True) == "oversubscription=true"
    assert parse_vary("scheduler=[fifo, 'tiresias,queues=2']").values == ("fifo", "tiresias,queues=2")
    assert parse_vary("simulator.latency_us=1e3").values == (1000.0,)
    assert parse_vary("background.h1=0,1").path == ("background", "h1")


@pytest.mark.parametrize("text, pattern", [
    ("oversubscription", "is not PATH=V1,V2,..."),
    ("topology.oversubscription=", "no values given"),
    ("topology.oversubscription=[]", "no values given"),
    ("topology.oversubscription=1,,2", "value 2 is empty"),
    ("topology.oversubscription=1,1.0", "1.0 is given twice (as 1"),
    ("topology.oversubscription=2024-01-01", "is a date, not a value a sweep sets"),
    ("topology.oversub=1", "'oversub' is not a field of config.topology (fields: kind and its builder's parameters; "
                           "fat_tree: k, "),
    ("topology.oversub=1", "did you mean 'oversubscription'?"),
    ("ecn.threshold=1", "'threshold' is not a field of config.ecn (fields: marking, method, threshold_bytes"),
    ("scael=1", "'scael' is not a field of config (fields: name, seed, topology, scale,"),
    ("seed=1,2", "the seed is what --seeds sets"),
    ("jobs=1", "config.jobs is a list"),
    ("topology=1", "config.topology is a section; vary one of its fields"),
    ("simulator=1", "vary one of its fields (latency_us, headers, token_buckets, ecn, ecn_mark_share, mode, "
                    "overlap, mltcp_step, sharing, tcp_efficiency)"),
    ("background=1", "config.background is a mapping"),
    ("iterations.x=1", "config.iterations is a value, with nothing below it"),
])
def test_parse_vary_rejects_bad_input(text, pattern):
    """Bad syntax, empty or repeated values, non-scalars and paths that are no scalar field: one ConfigError line."""
    with pytest.raises(ConfigError) as e:
        parse_vary(text)
    assert pattern in str(e.value) and "\n" not in str(e.value)


def test_parse_seeds():
    """Ranges are inclusive and mix with single seeds; bad, descending, repeated or out-of-range seeds fail."""
    assert parse_seeds("1-10") == tuple(range(1, 11))
    assert parse_seeds("1,2,5") == (1, 2, 5)
    assert parse_seeds(" 3-4 , 0") == (3, 4, 0)
    for text, pattern in (("", "is not a seed"), ("a", "is not a seed"), ("-1", "is not a seed"),
                          ("1-", "is not a seed"), ("3-1", "descending"), ("1-3,2", "seed 2 is given twice"),
                          ("4294967296", "out of range"), ("0-99999", "more than 1000 seeds")):
        with pytest.raises(ConfigError, match=re.escape(pattern)):
            parse_seeds(text)


# -- points ----------------------------------------------------------------------------------------


def test_points_are_whole_configs(tmp_path):
    """Each value x seed is the base config with the value and seed set, in value-major order."""
    points = sweep_points(tiny_cfg(), Vary(OVERSUB, (1, 2.5)), (7, 3))
    assert [(p.value, p.seed, p.path) for p in points] == [
        (1, 7, os.path.join("oversubscription=1", "seed-7")), (1, 3, os.path.join("oversubscription=1", "seed-3")),
        (2.5, 7, os.path.join("oversubscription=2.5", "seed-7")),
        (2.5, 3, os.path.join("oversubscription=2.5", "seed-3"))]
    assert [p.cfg.topology.params["oversubscription"] for p in points] == [1, 1, 2.5, 2.5]
    assert [p.cfg.seed for p in points] == [7, 3, 7, 3]
    assert all(p.cfg.jobs == tiny_cfg().jobs for p in points)


@pytest.mark.parametrize("vary, kwargs, pattern", [
    (Vary(OVERSUB, (1, -2)), {}, "sweep point topology.oversubscription=-2 (seed 1): config.topology: "
                                 "oversubscription must be a finite number > 0"),
    (Vary(("topology", "k"), (4,)), {}, "unknown parameter(s) 'k' for topology 'leaf_spine'; valid: n_leaf"),
    (Vary(("iterations",), (2, 0)), {}, "sweep point iterations=0 (seed 1): config.iterations: 0 is out of range"),
    (Vary(OVERSUB, (1,)), {"policies": ["consolidate", "nope"]}, "config.policies: unknown placement policy 'nope'"),
    (Vary(OVERSUB, (1,)), {"reference": "spread"}, "--reference: 'spread' is not a policy of the sweep "
                                                   "(policies: consolidate, random)"),
    (Vary(OVERSUB, (1,)), {"workers": 0}, "--workers: 0 is out of range"),
    (Vary(OVERSUB, (1,)), {"seeds": ()}, "--seeds: no seeds given"),
])
def test_every_point_is_validated_before_anything_runs(tmp_path, vary, kwargs, pattern):
    """An invalid value (even the last), policy, reference or worker count fails naming it, with no run
    directory made and nothing run."""
    seeds = kwargs.pop("seeds", (1, 2))
    lines: list[str] = []
    with pytest.raises(ConfigError) as e:
        run_sweep(tiny_cfg(str(tmp_path / "results")), vary, seeds, say=lines.append, **kwargs)
    assert pattern in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "results").exists() and lines == []


# -- results ---------------------------------------------------------------------------------------


def summary(policy: str, jct_mean_s: float, de: float | None = 0.5) -> PolicySummary:
    """A handwritten policy summary: what the sweep reads, the rest filler (as the simulator leaves it)."""
    return PolicySummary(
        policy=policy, machines_used=1, idle_machines_used=1, cluster_machines_in_use=1, fragmented_machines=0,
        comm_mean_s=0.1, comm_p99_s=None, waves=1, scheduler="waves", preemptions=0, jct_mean_s=jct_mean_s,
        wall_time_s=0.1, ecn_marks=None, scale=1.0, dilation=1.0, jobs=(), distribution_efficiency=de, backend="sim",
        comm_p90_s=0.2, jct_p90_s=jct_mean_s, makespan_s=2 * jct_mean_s)


def test_rows_normalise_per_seed_and_stats_use_the_sample_std():
    """Each JCT is over the reference's at its value and seed; without the reference's, none is normalised;
    stats are the mean and sample std over seeds, std None with one seed; a failed policy is counted."""
    vary = Vary(("scheduler",), ("fifo", "waves"))
    done = [  # out of order, as a pool returns them
        PointResult(1, 1, {"r": "placed none", "p": summary("p", 3.0)}, 0.1),
        PointResult(0, 2, {"r": summary("r", 4.0, 0.25), "p": summary("p", 6.0, None)}, 0.1),
        PointResult(0, 1, {"r": summary("r", 2.0), "p": summary("p", 3.0, 0.75)}, 0.1),
    ]
    rows = sweep_rows(vary, (1, 2), ("r", "p"), "r", done)
    assert [(r.value, r.seed, r.policy, r.jct_norm, r.error) for r in rows] == [
        ("fifo", 1, "r", 1.0, None), ("fifo", 1, "p", 1.5, None), ("fifo", 2, "r", 1.0, None),
        ("fifo", 2, "p", 1.5, None), ("waves", 1, "r", None, "placed none"), ("waves", 1, "p", None, None)]
    stats = {(s.value, s.policy): s for s in sweep_stats(vary, ("r", "p"), rows)}
    assert stats["fifo", "p"].to_dict() == {"value": "fifo", "policy": "p", "seeds": 2, "failed": 0,
                                            "jct_norm_mean": 1.5, "jct_norm_std": 0.0, "de_mean": 0.75,
                                            "de_std": None}
    assert stats["fifo", "r"].de_std == pytest.approx(statistics.stdev([0.5, 0.25]))
    assert (stats["waves", "r"].seeds, stats["waves", "r"].failed, stats["waves", "r"].jct_norm_mean) == (0, 1, None)
    assert (stats["waves", "p"].seeds, stats["waves", "p"].de_mean) == (0, 0.5)


def test_sweep_writes_rows_normalised_to_each_seeds_own_run(swept):
    """sweep.csv holds a row per value, seed and policy whose figures are that point's summary.json; the
    reference's normalised JCT is exactly 1 and the other's the ratio of the two JCTs there."""
    result, run_dir, _ = swept
    written = read_csv(os.path.join(run_dir, "sweep.csv"))
    assert tuple(written[0]) == ROW_COLUMNS
    assert [(r["value"], r["seed"], r["policy"]) for r in written] == [
        (v, s, p) for v in ("1", "4") for s in ("1", "2") for p in ("consolidate", "random")]
    assert written == [{k: "" if v is None else str(v) for k, v in r.to_dict().items()} for r in result.rows]
    for row in written:
        point = os.path.join(run_dir, f"oversubscription={row['value']}", f"seed-{row['seed']}")
        own = {p["policy"]: p for p in json.loads(open(os.path.join(point, "summary.json"), encoding="utf-8").read())[
            "policies"]}
        assert float(row["jct_mean_s"]) == own[row["policy"]]["jct_mean_s"]
        assert float(row["distribution_efficiency"]) == own[row["policy"]]["distribution_efficiency"]
        assert float(row["comm_mean_s"]) == own[row["policy"]]["comm_mean_s"]
        assert float(row["makespan_s"]) == own[row["policy"]]["makespan_s"]
        assert float(row["jct_norm"]) == own[row["policy"]]["jct_mean_s"] / own["consolidate"]["jct_mean_s"]
        assert row["error"] == ""
        if row["policy"] == "consolidate":
            assert row["jct_norm"] == "1.0"
        config = json.loads(open(os.path.join(point, "config.json"), encoding="utf-8").read())
        assert config["topology"]["oversubscription"] == int(row["value"]) and config["seed"] == int(row["seed"])
    # The oversubscribed uplink slows random's cross-rack jobs, and its seeds place differently.
    by = {(r.value, r.seed, r.policy): r.jct_norm for r in result.rows}
    assert by[4, 1, "random"] > by[1, 1, "random"] > 1.0 and by[4, 1, "random"] != by[4, 2, "random"]


def test_sweep_json_png_status_and_table(swept):
    """sweep.json has the sweep's parameter, values, seeds and reference and per value and policy the mean and
    sample std over seeds of the csv's figures; the plot is a PNG, the status complete, and the lines say each
    run's progress and end with the mean±std table."""
    result, run_dir, lines = swept
    doc = json.loads(open(os.path.join(run_dir, "sweep.json"), encoding="utf-8").read())
    assert {k: doc[k] for k in ("parameter", "values", "seeds", "policies", "reference", "runs", "runs_done")} == {
        "parameter": "topology.oversubscription", "values": [1, 4], "seeds": [1, 2],
        "policies": ["consolidate", "random"], "reference": "consolidate", "runs": 4, "runs_done": 4}
    written = read_csv(os.path.join(run_dir, "sweep.csv"))
    assert len(doc["stats"]) == 4
    for stat in doc["stats"]:
        mine = [r for r in written if r["value"] == str(stat["value"]) and r["policy"] == stat["policy"]]
        jct = [float(r["jct_norm"]) for r in mine]
        de = [float(r["distribution_efficiency"]) for r in mine]
        assert (stat["seeds"], stat["failed"]) == (2, 0)
        assert stat["jct_norm_mean"] == pytest.approx(statistics.fmean(jct))
        assert stat["jct_norm_std"] == pytest.approx(statistics.stdev(jct))
        assert stat["de_mean"] == pytest.approx(statistics.fmean(de))
        assert stat["de_std"] == pytest.approx(statistics.stdev(de))
        if stat["policy"] == "consolidate":
            assert (stat["jct_norm_mean"], stat["jct_norm_std"]) == (1.0, 0.0)
    with open(os.path.join(run_dir, "sweep.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    status = json.loads(open(os.path.join(run_dir, "status.json"), encoding="utf-8").read())
    assert status["status"] == "complete"
    progress = [line for line in lines if line.startswith("[")]
    line_re = r"\[\d/4\] oversubscription=[14] seed [12]: \d+\.\d s \(elapsed \d+:\d\d(, about \d+:\d\d left)?\)"
    assert len(progress) == 4 and all(re.fullmatch(line_re, line) for line in progress)
    assert "left" not in progress[-1]  # the last point leaves nothing to estimate
    table = table_lines(result)
    assert lines[-len(table) - 1:-1] == table
    assert table[0].startswith("Mean JCT normalised to consolidate per seed, mean±std over 2 seed(s)")
    header, _, *body = table[1].splitlines()
    assert header.split() == ["oversubscription", "consolidate", "random"]
    for line, value in zip(body, ("1", "4"), strict=True):
        stat = next(s for s in result.stats if s.value == int(value) and s.policy == "random")
        assert line.split() == [value, "1.000±0.000", f"{stat.jct_norm_mean:.3f}±{stat.jct_norm_std:.3f}"]


def test_workers_give_the_same_rows(swept, tmp_path):
    """Two pool workers give the rows, statistics and sweep.csv of one: the simulator is deterministic."""
    result, run_dir, _ = swept
    pooled = run_sweep(tiny_cfg(), result.vary, result.seeds, str(tmp_path), workers=2, say=lambda line: None)
    assert pooled.rows == result.rows and pooled.stats == result.stats
    with open(tmp_path / "sweep.csv", encoding="utf-8") as a, open(os.path.join(run_dir, "sweep.csv"),
                                                                   encoding="utf-8") as b:
        assert a.read() == b.read()


def test_a_local_dask_cluster_gives_the_same_rows(swept, tmp_path):
    """The Dask executor (a LocalCluster of 2 processes on loopback, started and stopped by the sweep)
    gives the rows, statistics and sweep.csv of the in-process run."""
    needs(_dask_missing(), "Dask")
    import psutil

    result, run_dir, _ = swept
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    lines: list[str] = []
    on_dask = run_sweep(tiny_cfg(), result.vary, result.seeds, str(tmp_path), workers=2, say=lines.append, on="dask")
    assert on_dask.rows == result.rows and on_dask.stats == result.stats
    assert (tmp_path / "sweep.csv").read_text() == open(os.path.join(run_dir, "sweep.csv"), encoding="utf-8").read()
    assert "2 at a time (local Dask cluster)" in lines[0]
    # Every process the cluster started is gone; Python's multiprocessing resource tracker, one per
    # process that spawns, stays until this one exits.
    started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before
               and "multiprocessing.resource_tracker" not in " ".join(p.cmdline())]
    gone, alive = psutil.wait_procs(started, timeout=10)
    assert not alive


@pytest.mark.parametrize("kwargs, pattern", [
    ({"on": "ray"}, r"--executor: 'ray' is not an executor \(valid: local, dask\)"),
    ({"on": "local", "address": "tcp://127.0.0.1:1"}, r"a scheduler address is for --executor dask"),
    ({"on": "dask", "address": "tcp://127.0.0.1:9"}, r"--dask-scheduler tcp://127.0.0.1:9: cannot reach a Dask "
                                                     r"scheduler there"),
])
def test_a_bad_executor_or_scheduler_is_one_error(tmp_path, monkeypatch, kwargs, pattern):
    """An unknown executor fails before anything runs; a scheduler nobody answers at (port 9 on
    loopback, tried for 1 s here) is one ConfigError."""
    if kwargs["on"] == "dask":
        needs(_dask_missing(), "Dask")
        monkeypatch.setattr("experiment.run.executors.CONNECT_TIMEOUT_S", 1.0)
    with pytest.raises(ConfigError, match=pattern) as e:
        run_sweep(tiny_cfg(), Vary(OVERSUB, (2,)), (1,), str(tmp_path / "run"), say=lambda line: None, **kwargs)
    assert "\n" not in str(e.value)


def test_dask_missing_is_one_line(tmp_path, monkeypatch):
    """Without Dask importable (a venv without it), --executor dask names the package to install."""
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ConfigError, match=r"--executor dask: Dask is not installed here \(pip install "
                                          r"'dask\[distributed\]'\)"):
        run_sweep(tiny_cfg(), Vary(OVERSUB, (2,)), (1,), str(tmp_path / "run"), say=lambda line: None, on="dask")


def test_policy_that_cannot_place_makes_the_sweep_incomplete(tmp_path):
    """elasticflow rounds d's 5 GPUs up to 8 of 7 free and places none: its row holds the error and no figures,
    the others are written, the status is incomplete and PolicyIncomplete names it."""
    cfg = tiny_cfg()
    cfg = dataclasses.replace(cfg, jobs=cfg.jobs + (JobConfig("d", "resnet50", 5, "ring"),), background={"h4": 1},
                              policies=("consolidate", "elasticflow"))
    with pytest.raises(PolicyIncomplete, match=r"1 of 2 policy runs could not place every job \(elasticflow at "
                                               r"oversubscription=2 seed 1\)"):
        run_sweep(cfg, Vary(OVERSUB, (2,)), (1,), str(tmp_path), say=lambda line: None)
    ef = read_csv(tmp_path / "sweep.csv")[1]
    assert ef["policy"] == "elasticflow" and ef["error"].startswith("policy 'elasticflow' placed none")
    assert ef["jct_mean_s"] == ef["jct_norm"] == ""
    assert json.loads((tmp_path / "status.json").read_text())["status"] == "incomplete"
    assert json.loads((tmp_path / "sweep.json").read_text())["stats"][1]["failed"] == 1


# -- the command line --------------------------------------------------------------------------------



@pytest.mark.parametrize("args, pattern", [
    (["--vary", "topology.oversub=1,2"], "error: --vary topology.oversub: 'oversub' is not a field of "
                                         "config.topology"),
    (["--vary", "topology.oversubscription=1,0"], "error: sweep point topology.oversubscription=0 (seed 1)"),
    (["--vary", "topology.oversubscription=1", "--seeds", "3-1"], "error: --seeds: '3-1' is a descending range"),
    ([], "error: the following arguments are required: --vary"),
])
def test_cli_bad_input_is_one_line_and_exit_code_2(tmp_path, args, pattern):
    """A bad --vary, value or --seeds: exit code 2, one line on stderr, no traceback, no run directory."""
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_YAML)
    cp = run_cli("sweep", "-c", str(config), "--results", str(tmp_path / "results"), *args)
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert "Traceback" not in cp.stderr + cp.stdout
    assert len(cp.stderr.strip().splitlines()) == 1 and pattern in cp.stderr, cp.stderr
    assert not (tmp_path / "results").exists()


def test_cli_sweep_prints_its_run_directory(tmp_path):
    """A sweep that completes exits 0 and ends by printing its run directory, which holds its results."""
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_YAML)
    cp = run_cli("sweep", "-c", str(config), "--vary", "topology.oversubscription=1,2", "--seeds", "1,2",
                 "-p", "spread", "-p", "consolidate", "--reference", "consolidate", "--workers", "2",
                 "--results", str(tmp_path / "results"))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    run_dir = cp.stdout.strip().splitlines()[-1]
    assert os.path.dirname(run_dir) == str(tmp_path / "results") and run_dir.endswith("-tiny-sweep")
    assert json.loads(open(os.path.join(run_dir, "status.json"), encoding="utf-8").read())["status"] == "complete"
    doc = json.loads(open(os.path.join(run_dir, "sweep.json"), encoding="utf-8").read())
    assert (doc["policies"], doc["reference"], doc["runs_done"]) == (["spread", "consolidate"], "consolidate", 4)


def _read_line(fd: int, deadline_s: float = 120) -> str:
    """One line from the pipe ``fd``, read a byte at a time so nothing after it leaves the pipe."""
    line = b""
    while not line.endswith(b"\n"):
        assert select.select([fd], [], [], deadline_s)[0], f"no line within {deadline_s:g} s: {line!r}"
        byte = os.read(fd, 1)
        assert byte, f"the output ended inside a line: {line!r}"
        line += byte
    return line.decode()


def _read_to_end(fd: int, deadline_s: float = 120) -> str:
    """The rest of the pipe ``fd`` until every writer has closed it."""
    chunks = []
    while True:
        assert select.select([fd], [], [], deadline_s)[0], f"the output did not end within {deadline_s:g} s"
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks).decode()
        chunks.append(chunk)


def test_cli_ctrl_c_stops_the_pool_and_writes_what_was_done(tmp_path):
    """Ctrl-C during a pooled sweep stops the pool's worker processes, exits 130 with one line, marks the run
    interrupted and writes the rows of the runs done. The sweep cannot finish first, however the machine
    schedules it: its output goes to a one-page pipe that is not read after the second progress line, and
    the progress lines of its runs but the last one are longer than that, so it stops at a line before
    the last one's at the latest (the line written after its run is counted)."""
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_YAML)
    runs = 4 * 50
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, 4096)
    page = fcntl.fcntl(read_end, fcntl.F_GETPIPE_SZ)
    label = parse_vary("topology.oversubscription=1,2,4,8").label(1)
    shortest = len(f"[1/{runs}] {label} seed 1: 0.0 s\n")  # every progress line is this long or longer
    assert (runs - 3) * shortest > page, "the lines after the second one must not all fit in the pipe"
    try:
        p = subprocess.Popen([*CLI, "sweep", "-c", str(config), "--vary", "topology.oversubscription=1,2,4,8",
                              "--seeds", "1-50", "--workers", "2", "--results", str(tmp_path / "results")],
                             stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    finally:
        os.close(write_end)
    try:
        head = [_read_line(read_end) for _ in range(3)]
        assert head[0].startswith("sweep ") and head[2].startswith(f"[2/{runs}]"), head
        with open(f"/proc/{p.pid}/task/{p.pid}/children", encoding="ascii") as f:
            workers = f.read().split()
        assert len(workers) == 2
        p.send_signal(signal.SIGINT)
        out = _read_to_end(read_end)
        err = p.stderr.read()
        p.wait(timeout=60)
    finally:
        os.close(read_end)
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, err
    assert err.strip().splitlines() == ["interrupted: the sweep and its worker processes were stopped; the runs "
                                        "done so far are written"]
    assert not [pid for pid in workers if os.path.exists(f"/proc/{pid}")]
    (run_dir,) = (tmp_path / "results").iterdir()
    status = json.loads((run_dir / "status.json").read_text())
    done = json.loads((run_dir / "sweep.json").read_text())["runs_done"]
    assert status["status"] == "interrupted" and 2 <= done < runs
    assert len(read_csv(run_dir / "sweep.csv")) == 2 * done
    assert f"interrupted after {done} of {runs} runs" in out


POOL_INTERRUPTED = """
import signal, sys
sys.path.insert(0, sys.argv[1])
from experiment.run.executors import run_local

def work(blob, i):
    if i:
        signal.pause()  # busy until the pool is stopped: the calls behind it stay queued
    return i

def stop(_):
    raise KeyboardInterrupt

if __name__ == "__main__":
    try:
        run_local(work, [(b"x" * 1_000_000, i) for i in range(20)], stop, 2)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
"""


def test_a_pool_interrupted_with_large_calls_still_queued_lets_the_process_exit(tmp_path):
    """Calls of 1 MB each (a trace's config is that large) left in the pool's queue when Ctrl-C stops its
    workers: the process still exits, instead of waiting forever for the queue's feeder at exit."""
    script = tmp_path / "interrupted.py"
    script.write_text(POOL_INTERRUPTED)
    p = subprocess.run([sys.executable, str(script), ROOT], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "interrupted", p.stderr


def test_a_back_end_that_runs_one_experiment_at_a_time_takes_one_local_worker(tmp_path):
    """The emulator sweeps one point after another on this machine: more workers, or Dask, is one line
    and nothing is written."""
    for kwargs in ({"workers": 2}, {"on": "dask"}):
        with pytest.raises(ConfigError) as e:
            run_sweep(tiny_cfg(str(tmp_path / "results")), Vary(("seed",), (1, 2)), (1,), backend="emu", **kwargs)
        assert "runs one experiment at a time" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "results").exists()
