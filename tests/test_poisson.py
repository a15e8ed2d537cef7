"""Poisson traces (``experiment.config.poisson``): seeded, at the offered load asked, readable as a trace."""

from __future__ import annotations

import pytest

from common.errors import ConfigError
from experiment.config.poisson import main, poisson_jobs
from experiment.config.traces import read_trace
from jobs.models import get_model


def test_the_arrival_rate_gives_the_load_asked_and_the_file_reads_back(tmp_path):
    jobs = poisson_jobs(400, 24, 0.9, gpus=(1, 12), iterations=(200, 1000), seed=3)
    assert jobs == poisson_jobs(400, 24, 0.9, gpus=(1, 12), iterations=(200, 1000), seed=3)
    work = sum(j.num_gpu * j.duration for j in jobs)
    offered = work / (jobs[-1].submit_time * 24)
    assert offered == pytest.approx(0.9, rel=0.1)  # over 400 arrivals
    assert all(1 <= j.num_gpu <= 12 and 200 <= j.iterations <= 1000 for j in jobs)
    assert all(j.duration == pytest.approx(j.iterations * get_model(j.model_name).compute_time_s, abs=1e-3)
               for j in jobs)
    path = tmp_path / "t.csv"
    assert main(["--out", str(path), "--jobs", "20", "--gpus-total", "24", "--seed", "3"]) == 0
    trace = read_trace(str(path))
    assert trace.format == "tiresias" and len(trace.jobs) == 20


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    with pytest.raises(ConfigError, match="unknown models"):
        poisson_jobs(5, 24, 0.9, models=("gpt5",))
    with pytest.raises(ConfigError, match="load in"):
        poisson_jobs(5, 24, 3.0)
    assert main(["--out", str(tmp_path / "x.csv"), "--gpus-total", "4", "--gpus", "1,12"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: poisson trace: need 1 <= gpus") and err.count("\n") == 1
