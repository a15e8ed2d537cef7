"""Unit tests of the strict experiment configuration loader and validator."""

import dataclasses
import json
import os

import pytest

from common.errors import ConfigError
from testbed import config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = os.path.join(ROOT, "experiments", "default.yaml")


def base(**over):
    """A small valid config as a dict."""
    d = {"name": "t", "topology": {"kind": "fat_tree", "k": 4}, "scale": 500,
         "jobs": [{"name": "a", "model": "resnet50", "workers": 4}], "policies": ["consolidate"]}
    d.update(over)
    return d


def test_default_experiment_is_valid():
    """experiments/default.yaml loads, validates, uses every policy and 4-6 jobs of 2-8 workers."""
    cfg = config.load(DEFAULT)
    g = config.validate(cfg)
    assert g.graph["kind"] == "fat_tree" and g.graph["params"]["k"] == 4
    from placement import POLICIES
    assert set(config.policy_specs(cfg)) == set(POLICIES)
    assert 4 <= len(cfg.jobs) <= 6 and all(2 <= j.workers <= 8 for j in cfg.jobs)
    assert any(v > 0 for v in cfg.background.values())


def test_resolved_config_round_trips(tmp_path):
    """The resolved config written with every run (config.json) loads back to the same config."""
    cfg = config.from_dict(base(background={"h1": 2}))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.to_dict(cfg)))
    assert config.load(str(path)) == cfg


def test_unknown_key_gets_a_hint():
    """A misspelt key is an error naming the key and suggesting the right one."""
    with pytest.raises(ConfigError, match="'iteration'.*did you mean 'iterations'"):
        config.from_dict(base(iteration=3))


def test_unknown_job_key_is_rejected():
    """Unknown keys inside a job are errors too."""
    with pytest.raises(ConfigError, match=r"jobs\[0\].*'gpus'"):
        config.from_dict(base(jobs=[{"name": "a", "model": "resnet50", "workers": 2, "gpus": 2}]))


def test_wrong_type_is_rejected():
    """A string where a number belongs is an error naming the field."""
    with pytest.raises(ConfigError, match="config.scale: expected float"):
        config.from_dict(base(scale="big"))


@pytest.mark.parametrize("over, pattern", [
    ({"topology": {"kind": "fat_tree", "k": 5}}, "even"),
    ({"topology": {"kind": "torus"}}, "fat_tree"),
    ({"policies": ["best"]}, "consolidate"),
    ({"jobs": [{"name": "a", "model": "resnet50", "workers": 65}]}, "never be placed"),
    ({"jobs": [{"name": "a", "model": "gpt9", "workers": 2}]}, "resnet50"),
    ({"jobs": [{"name": "a", "model": "resnet50", "workers": 2, "collective": "tree9"}]}, "ring"),
    ({"scale": 5, "dilation": 1}, r"10000 Mbit/s / \(scale 5 x dilation 1\) = 2000 Mbit/s is outside the shapeable"),
    ({"time_limit_s": 0}, r"config.time_limit_s: 0 is out of range \(must be > 0\)"),
    ({"time_limit_s": -60}, r"config.time_limit_s: -60 is out of range"),
    ({"background": {"h99": 1}}, "h99"),
    ({"mode": "dream"}, "replay"),
    ({"jobs": [{"name": "a", "model": "resnet50", "workers": 2}, {"name": "a", "model": "vgg16", "workers": 2}]},
     "duplicate"),
])
def test_validation_errors_name_the_problem(over, pattern):
    """Each invalid setting fails validation with a message naming the value or the valid choices."""
    with pytest.raises(ConfigError, match=pattern):
        config.validate(config.from_dict(base(**over)))


def test_background_reduces_capacity():
    """Background load counts against capacity: a job that fits an idle cluster may not fit a busy one."""
    busy = {f"h{i}": 4 for i in range(1, 16)}
    config.validate(config.from_dict(base(background=busy)))  # 4 workers, 4 free GPUs: fits
    job = [{"name": "a", "model": "resnet50", "workers": 5}]
    with pytest.raises(ConfigError, match="only 4 free"):
        config.validate(config.from_dict(base(background=busy, jobs=job)))


def test_unreadable_and_malformed_files(tmp_path):
    """A missing file or invalid YAML is a ConfigError naming the path."""
    with pytest.raises(ConfigError, match="cannot read"):
        config.load(str(tmp_path / "nope.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        config.load(str(bad))
    top = tmp_path / "list.yaml"
    top.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="top level"):
        config.load(str(top))


def test_default_dilation_round_trips():
    """dilation defaults to 4 and time_limit_s to 3600 s; both survive to_dict -> from_dict."""
    cfg = config.from_dict(base())
    assert cfg.dilation == 3.0 and cfg.time_limit_s == 3600.0
    d = config.to_dict(cfg)
    assert d["dilation"] == 3.0 and d["time_limit_s"] == 3600.0
    assert config.from_dict(d) == cfg
    custom = config.from_dict(base(dilation=2.5, time_limit_s=600))
    assert config.from_dict(config.to_dict(custom)).dilation == 2.5


@pytest.mark.parametrize("dilation, pattern", [
    (0.5, r"config.dilation: 0.5 must be >= 1 \(1 = no dilation\)"),
    (0, r"config.dilation: 0 must be >= 1 \(1 = no dilation\)"),
    (-1, r"config.dilation: -1 must be >= 1 \(1 = no dilation\)"),
])
def test_dilation_below_one_is_rejected(dilation, pattern):
    """A dilation below 1 fails validation with a message naming the value and the valid range."""
    with pytest.raises(ConfigError, match=pattern):
        config.validate(config.from_dict(base(dilation=dilation)))


@pytest.mark.parametrize("dilation, pattern", [
    ("4", r"config.dilation: expected float, got '4'"),
    (float("nan"), r"config.dilation: expected a finite number, got nan"),
    (float("inf"), r"config.dilation: expected a finite number, got inf"),
    (float("-inf"), r"config.dilation: expected a finite number, got -inf"),
])
def test_dilation_of_wrong_type_or_not_finite_is_rejected(dilation, pattern):
    """A string, NaN or infinite dilation is rejected while loading, naming the key and the value."""
    with pytest.raises(ConfigError, match=pattern):
        config.from_dict(base(dilation=dilation))


@pytest.mark.parametrize("text, pattern", [
    ("dilation: .nan\n", r"config.dilation: expected a finite number, got nan"),
    ("dilation: .inf\n", r"config.dilation: expected a finite number, got inf"),
    ("scale: -.inf\n", r"config.scale: expected a finite number, got -inf"),
    ("iterations: .inf\n", r"config.iterations: expected a finite number, got inf"),
    ("ecn: {threshold_us: .nan}\n", r"config.ecn.threshold_us: expected a finite number, got nan"),
    ("ecn: {threshold_us: .inf}\n", r"config.ecn.threshold_us: expected a finite number, got inf"),
])
def test_yaml_nan_and_inf_are_rejected(tmp_path, text, pattern):
    """YAML .nan and .inf (which parse to floats) are errors naming the key, nested keys included."""
    path = tmp_path / "x.yaml"
    path.write_text("jobs: [{name: a, model: resnet50, workers: 2}]\n" + text)
    with pytest.raises(ConfigError, match=pattern):
        config.load(str(path))


def test_dilation_below_minimum_link_rate_is_rejected():
    """A dilation that slows links below MIN_RATE_MBPS fails validation naming the rate, scale and dilation."""
    from testbed.net import MIN_RATE_MBPS

    cfg = config.from_dict(base(dilation=250))  # 10000 Mbit/s / (500 x 250) = 0.08 Mbit/s
    assert 10000 / (500 * 250) < MIN_RATE_MBPS
    with pytest.raises(ConfigError, match=r"\(scale 500 x dilation 250\) = 0.08 Mbit/s is outside the shapeable "
                                          r"range \[0.1, 1000\] Mbit/s; lower the scale factor or the dilation"):
        config.validate(cfg)
    config.validate(config.from_dict(base(dilation=200)))  # exactly 0.1 Mbit/s: still shapeable


def test_huge_dilation_is_rejected_by_the_time_limit():
    """A dilation whose wall-time lower bound exceeds time_limit_s is rejected with the estimate and the fix."""
    cfg = config.from_dict(base(scale=10, dilation=1000, policies=["consolidate", "spread"]))
    # 2 policies x (2 + 10) iterations x 0.178 s (resnet50) x 1000 = 4272 s; links at 1 Mbit/s are fine
    with pytest.raises(ConfigError) as e:
        config.validate(cfg)
    msg = str(e.value)
    assert msg == ("config.dilation: 1000 makes the experiment take at least 1h 11m (4272 s) of wall time "
                   "(2 policies x 12 iterations x 0.178 s compute (resnet50) x 1000), above time_limit_s 3600 s; "
                   "lower dilation or raise time_limit_s")
    config.validate(dataclasses.replace(cfg, time_limit_s=4300))  # the same experiment within a larger budget


def test_time_limit_without_dilation_names_time_limit():
    """Without dilation the time-limit error names time_limit_s (there is no dilation to lower)."""
    cfg = config.from_dict(base(dilation=1, scale=10, time_limit_s=1))
    with pytest.raises(ConfigError, match=r"^config.time_limit_s: the experiment takes at least 2.14 s .*"
                                          r"above time_limit_s 1 s; raise time_limit_s"):
        config.validate(cfg)


def test_wall_time_lower_bound_by_hand():
    """wall_time_lower_bound_s = policies x (warm-up + iterations) x slowest job's compute x dilation."""
    cfg = config.from_dict(base(
        dilation=2.5, iterations=3, warmup_iterations=1, policies=["consolidate", "spread", "random"],
        jobs=[{"name": "a", "model": "resnet50", "workers": 2}, {"name": "b", "model": "vgg16", "workers": 2}]))
    # 3 policies x 4 iterations x 0.278 s (vgg16, slower than resnet50's 0.178 s) x 2.5 = 8.34 s
    assert config.wall_time_lower_bound_s(cfg) == pytest.approx(8.34, rel=1e-12)
    assert config.wall_time_lower_bound_s(dataclasses.replace(cfg, dilation=1.0)) == pytest.approx(3.336, rel=1e-12)


def test_dilation_divides_link_rates_like_scale():
    """link_rates_mbps(g, 500, 4) equals link_rates_mbps(g, 2000) on a fat-tree, edge for edge."""
    from testbed.net import link_rates_mbps
    from topo import build_topology

    g = build_topology("fat_tree", k=4)
    dilated = link_rates_mbps(g, 500, 4)
    assert dilated == link_rates_mbps(g, 2000)
    assert len(dilated) == g.number_of_edges() and set(dilated.values()) == {5.0}
    assert link_rates_mbps(g, 500) == {e: 20.0 for e in dilated}  # the default dilation is 1
