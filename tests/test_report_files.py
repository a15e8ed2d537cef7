"""Plots drawn from a run directory's files (experiment.reporting.report_files) and `run_testbed.py report RUN_DIR`."""

from __future__ import annotations

import csv

from test_cli import assert_clean_error, run_cli

from experiment.reporting.report_files import MIN_CDF_JOBS, jct_by_policy, layout, link_utilisation, write_file_plots
from topo import fat_tree
from topo.io import write_topology_json


def _run_dir(tmp_path, jobs_per_policy: int):
    run = tmp_path / "run"
    run.mkdir()
    (run / "report.txt").write_text("Per policy\npolicy  comm mean s\nconsolidate  0.3\n")
    with open(run / "jobs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["policy", "job", "jct_s", "duration_s"])
        for policy, k in (("consolidate", 1.0), ("spread", 2.0)):
            for i in range(jobs_per_policy):
                w.writerow([policy, f"j{i}", k * (10 + i), 10 + i])
            w.writerow([policy, "unfinished", "", 5])
    g = fat_tree(4)
    write_topology_json(g, str(run / "topology.json"))
    with open(run / "link_bytes.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["policy", "wave", "src", "dst", "window_utilisation"])
        w.writerows([["spread", 0, "a1", "c1", 0.4], ["spread", 1, "a1", "c1", 0.7], ["spread", 0, "c1", "a1", 0.9],
                     ["spread", 0, "h1", "e1", -1e-6], ["consolidate", 0, "h1", "e1", ""]])
    return run


def test_figures_come_from_the_files(tmp_path):
    run = _run_dir(tmp_path, MIN_CDF_JOBS)
    jcts = jct_by_policy(str(run))
    assert len(jcts["spread"]) == MIN_CDF_JOBS and jcts["spread"][0] == (20.0, 2.0)  # the unfinished job left out
    util = link_utilisation(str(run))
    assert util == {"spread": {frozenset(("a1", "c1")): 0.9, frozenset(("h1", "e1")): 0.0}}
    pos = layout([{"id": "h1", "role": "machine"}, {"id": "e1", "role": "switch", "tier": "edge"},
                  {"id": "c1", "role": "switch", "tier": "core"}, {"id": "h2", "role": "machine"}])
    assert pos["h1"][1] < pos["e1"][1] < pos["c1"][1] and pos["h1"][0] < pos["h2"][0]
    assert sorted(p.rsplit("/", 1)[1] for p in write_file_plots(str(run))) == ["jct_cdf.png", "links.png"]


def test_few_jobs_draw_no_distribution_and_missing_files_draw_nothing(tmp_path):
    run = _run_dir(tmp_path, MIN_CDF_JOBS - 1)
    assert [p.rsplit("/", 1)[1] for p in write_file_plots(str(run))] == ["links.png"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert write_file_plots(str(empty)) == []


def test_report_renders_a_saved_run_again_byte_for_byte(tmp_path):
    """The default experiment's simulated run (8 policies, 5 jobs each): its report.txt and every plot
    drawn from its files, removed and rendered again by `report`, come out byte for byte as the run
    wrote them (jobs in the order they were placed)."""
    ran = run_cli("--backend", "sim", "--results", str(tmp_path), "-q")
    assert ran.returncode == 0, ran.stderr
    (run,) = tmp_path.iterdir()
    saved = {p.name: p.read_bytes() for p in run.iterdir() if p.suffix == ".png" or p.name == "report.txt"}
    assert {"report.txt", "policies.png", "timelines.png"} <= set(saved), sorted(saved)
    for name in saved:
        (run / name).unlink()
    cp = run_cli("report", str(run))
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.startswith(saved["report.txt"].decode())
    assert {name: (run / name).read_bytes() for name in saved} == saved


def test_report_refuses_what_is_not_a_saved_run_in_one_line(tmp_path):
    assert_clean_error(run_cli("report", str(tmp_path / "nope")), "not a finished run's directory (no summary.json)")
    (tmp_path / "summary.json").write_text('{"backend": "sim", "policies": [{"policy": "x"}]}')
    assert_clean_error(run_cli("report", str(tmp_path)), "not a summary this version writes")


def test_a_run_without_plots_draws_none_and_report_draws_them_later(tmp_path):
    """`plots: false`: the run writes its tables, CSV and JSON but no PNG, and says how to draw
    them; `report` draws them from its files."""
    ran = run_cli("--backend", "sim", "--results", str(tmp_path), "-q", "--set", "plots=false",
                  "--set", "policies=[consolidate,spread]", "--set", "iterations=2")
    assert ran.returncode == 0, ran.stderr
    (run,) = tmp_path.iterdir()
    assert not list(run.glob("*.png")) and (run / "summary.json").exists() and (run / "jobs.csv").exists()
    assert f"plots: not drawn (plots: false); python3 run_testbed.py report {run} draws them" in ran.stdout
    cp = run_cli("report", str(run))
    assert cp.returncode == 0, cp.stderr
    assert {"policies.png", "timelines.png"} <= {p.name for p in run.glob("*.png")}
