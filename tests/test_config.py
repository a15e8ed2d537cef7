"""Unit tests of the strict experiment configuration loader and validator."""

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
    ({"scale": 5}, "shapeable range"),
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
