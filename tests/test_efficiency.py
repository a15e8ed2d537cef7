"""NetPack's job metrics (spec §5.6): distribution efficiency and JCT normalised to NetPack."""

from __future__ import annotations

import pytest

from experiment.reporting.efficiency import distribution_efficiency, jct_lines, normalised, reference_policy


def test_distribution_efficiency_is_compute_time_over_jct_averaged_over_jobs():
    # 10 iterations of 0.5 s compute finishing in 5 s: 1.0; in 10 s: 0.5
    assert distribution_efficiency([(10, 0.5, 5.0), (10, 0.5, 10.0)]) == pytest.approx(0.75)
    assert distribution_efficiency([(10, None, 5.0), (10, 0.5, None), (3, 1.0, 0.0)]) is None


def test_the_reference_is_netpack_with_any_parameters_else_the_first():
    assert reference_policy(["random", "netpack,pat_gbps=14", "netpack"]) == "netpack,pat_gbps=14"
    assert reference_policy(["random", "spread"]) == "random" and reference_policy([]) is None
    assert normalised({"a": 2.0, "b": 3.0, "c": None}, "a") == {"a": 1.0, "b": 1.5, "c": None}
    assert normalised({"a": 0.0, "b": 3.0}, "a") == {"a": None, "b": None}


def test_the_jct_table_names_its_reference_and_says_nothing_without_jcts():
    lines = jct_lines([("gpu_balance", 12.0, 0.4), ("netpack,pat_gbps=14", 8.0, 0.6)])
    assert "normalised to netpack,pat_gbps=14" in lines[0]
    table = lines[1].splitlines()
    assert table[0].split() == ["policy", "JCT", "mean", "s", "JCT", "/", "netpack", "DE"]
    assert table[2].split() == ["gpu_balance", "12.000", "1.50", "0.40"]
    assert table[3].split() == ["netpack,pat_gbps=14", "8.000", "1.00", "0.60"]
    assert jct_lines([("a", None, None)]) == []
