"""Unit tests of the strict experiment configuration loader and validator."""

import dataclasses
import json
import os

import pytest
from conftest import ROOT
from fifos import read_fifo_within

from common.errors import ConfigError
from experiment.config import schema as config
from placement.base import PlacementPolicy

DEFAULT = os.path.join(ROOT, "experiments", "default.yaml")


def base(**over):
    """A small valid config as a dict."""
    d = {"name": "t", "topology": {"kind": "fat_tree", "k": 4}, "scale": 500,
         "jobs": [{"name": "a", "model": "resnet50", "workers": 4}], "policies": ["consolidate"]}
    d.update(over)
    return d


def test_default_experiment_is_valid():
    """experiments/default.yaml loads, validates, uses every policy but the NetPack paper's baselines
    (experiments/netpack.yaml runs those) and Cassini with its Themis-like base (experiments/cassini.yaml
    runs those) and pinned placement (experiments/validation_pairs.yaml runs it), and 4-6 jobs of 2-8 workers."""
    cfg = config.load(DEFAULT)
    g = config.validate(cfg)
    assert g.graph["kind"] == "fat_tree" and g.graph["params"]["k"] == 4
    from placement import POLICIES
    from placement.netpack.baselines import BaselinePolicy
    baselines = {name for name, cls in POLICIES.items() if issubclass(cls, BaselinePolicy)}
    assert len(baselines) == 6
    assert set(config.policy_specs(cfg)) == set(POLICIES) - baselines - {"cassini", "themis", "pinned"}
    assert 4 <= len(cfg.jobs) <= 6 and all(2 <= j.workers <= 8 for j in cfg.jobs)
    assert any(v > 0 for v in cfg.background.values())


def test_resolved_config_round_trips(tmp_path):
    """The resolved config written with every run (config.json, its paths absolute) loads back to the
    same config, wherever the file is."""
    cfg = config.absolute_paths(config.from_dict(base(background={"h1": 2})), "/somewhere")
    assert cfg.results_dir == "/somewhere/results"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.to_dict(cfg)))
    assert config.load(str(path)) == cfg


def test_paths_in_a_config_file_are_relative_to_its_directory_and_on_the_command_line_to_here(tmp_path,
                                                                                             monkeypatch):
    from experiment.config.overrides import apply_settings

    d = tmp_path / "configs"
    d.mkdir()
    (d / "x.yaml").write_text(json.dumps({**base(), "trace": {"file": "../traces/t.csv"},
                                          "cassini": {"profiles": "p.json"},
                                          "topology": {"kind": "file", "path": "topo.json"}}))
    cfg = config.load(str(d / "x.yaml"))
    assert cfg.trace.file == str(tmp_path / "traces" / "t.csv") and cfg.cassini.profiles == str(d / "p.json")
    assert cfg.topology.params["path"] == str(d / "topo.json") and cfg.results_dir == "results"  # not given: here
    monkeypatch.chdir(tmp_path)
    assert apply_settings(cfg, ["trace.file=mine.csv"]).trace.file == str(tmp_path / "mine.csv")


def test_unknown_key_gets_a_hint():
    """A misspelt key is an error naming the key and suggesting the right one."""
    with pytest.raises(ConfigError, match="'iteration'.*did you mean 'iterations'"):
        config.from_dict(base(iteration=3))


def test_unknown_job_key_is_rejected():
    """Unknown keys inside a job are errors too."""
    with pytest.raises(ConfigError, match=r"jobs\[0\].*'gpus'"):
        config.from_dict(base(jobs=[{"name": "a", "model": "resnet50", "workers": 2, "gpus": 2}]))


def test_wrong_type_is_rejected():
    """A string where a number belongs is an error naming the field, the value and the valid range."""
    with pytest.raises(ConfigError, match=r"^config.scale: 'big' is not a number \(a finite number in \(0, "):
        config.validate(config.from_dict(base(scale="big")))


@pytest.mark.parametrize("over, pattern", [
    ({"topology": {"kind": "fat_tree", "k": 5}}, "even"),
    ({"topology": {"kind": "torus"}}, "fat_tree"),
    ({"policies": ["best"]}, "consolidate"),
    ({"jobs": [{"name": "a", "model": "resnet50", "workers": 65}]}, "never be placed"),
    ({"jobs": [{"name": "a", "model": "gpt9", "workers": 2}]}, "resnet50"),
    ({"jobs": [{"name": "a", "model": "resnet50", "workers": 2, "collective": "tree9"}]}, "ring"),
    ({"scale": 5, "dilation": 1}, r"10000 Mbit/s / \(scale 5 x dilation 1\) = 2000 Mbit/s is outside the shapeable"),
    ({"time_limit_s": 0}, r"config.time_limit_s: 0 is out of range \(a finite number in \(0, 10000000\]\)"),
    ({"time_limit_s": -60}, r"config.time_limit_s: -60 is out of range"),
    ({"background": {"h99": 1}}, "h99"),
    ({"mode": "dream"}, "replay"),
    ({"jobs": [{"name": "a", "model": "resnet50", "workers": 2}, {"name": "a", "model": "vgg16", "workers": 2}]},
     "duplicate"),
    ({"jobs": [{"name": "a", "model": "resnet50", "workers": 2, "compute_ms": -1}]},
     r"config.jobs\[0\].compute_ms: -1 is out of range"),
    ({"preemption": {"restore_s": -1}}, r"config.preemption.restore_s: -1 is out of range"),
    ({"mode": "train", "jobs": [{"name": "a", "model": "small_cnn", "workers": 2, "compute_ms": 5}]},
     r"config.jobs\[0\].compute_ms: 5.0 sets a replayed compute time, but mode 'train' computes"),
    ({"mode": "train", "jobs": [{"name": "a", "model": "vgg16", "workers": 2}]},
     "config.jobs: job 'a': mode 'train' trains only small_cnn, not 'vgg16'; use mode 'replay'"),
    ({"trace": {"file": "experiments/traces/cassini-thesis-24gpu-s1.csv", "compute_scale": 0}},
     r"config.trace.compute_scale: 0 is out of range \(a finite number in \(0, 100\]\)"),
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
    (0.5, r"config.dilation: 0.5 is out of range \(a finite number in \[1, 10000\]; 1 = no dilation\)"),
    (0, r"config.dilation: 0 is out of range \(a finite number in \[1, 10000\]; 1 = no dilation\)"),
    (-1, r"config.dilation: -1 is out of range \(a finite number in \[1, 10000\]; 1 = no dilation\)"),
])
def test_dilation_below_one_is_rejected(dilation, pattern):
    """A dilation below 1 fails validation with a message naming the value and the valid range."""
    with pytest.raises(ConfigError, match=pattern):
        config.validate(config.from_dict(base(dilation=dilation)))


@pytest.mark.parametrize("dilation, pattern", [
    ("4", r"config.dilation: '4' is not a number \(a finite number in \[1, 10000\]"),
    (float("nan"), r"config.dilation: nan is not finite"),
    (float("inf"), r"config.dilation: inf is not finite"),
    (float("-inf"), r"config.dilation: -inf is not finite"),
])
def test_dilation_of_wrong_type_or_not_finite_is_rejected(dilation, pattern):
    """A string, NaN or infinite dilation is rejected, naming the key and the value."""
    with pytest.raises(ConfigError, match=pattern):
        config.validate(config.from_dict(base(dilation=dilation)))


@pytest.mark.parametrize("text, pattern", [
    ("dilation: .nan\n", r"config.dilation: nan is not finite"),
    ("dilation: .inf\n", r"config.dilation: inf is not finite"),
    ("scale: -.inf\n", r"config.scale: -inf is not finite"),
    ("iterations: .inf\n", r"config.iterations: inf is not an integer"),
    ("job_timeout_s: .nan\n", r"config.job_timeout_s: nan is not finite"),
    ("job_timeout_s: .NaN\n", r"config.job_timeout_s: nan is not finite"),
    ("stats_interval_s: .NAN\n", r"config.stats_interval_s: nan is not finite"),
    ("stats_interval_s: .Inf\n", r"config.stats_interval_s: inf is not finite"),
    ("time_limit_s: .inf\n", r"config.time_limit_s: inf is not finite"),
    ("ecn: {threshold_us: .nan}\n", r"config.ecn.threshold_us: nan is not finite"),
    ("ecn: {threshold_us: .inf}\n", r"config.ecn.threshold_us: inf is not finite"),
    ("ecn: {max_probability: .nan}\n", r"config.ecn.max_probability: nan is not finite"),
    ("ecn: {threshold_bytes: .nan}\n", r"config.ecn.threshold_bytes: nan is not an integer"),
    ("topology: {kind: fat_tree, k: 4, bw_mbps: .nan}\n", r"config.topology.bw_mbps: nan is not a finite"),
    ("topology: {kind: leaf_spine, n_leaf: 2, n_spine: 1, hosts_per_leaf: 2, oversubscription: -.inf}\n",
     r"config.topology.oversubscription: -inf is not a finite"),
    ("background: {h1: .nan}\n", r"config.background.h1: nan is not an integer"),
])
def test_yaml_nan_and_inf_are_rejected(tmp_path, text, pattern):
    """YAML .nan and .inf in any spelling are errors naming the key: top level, ECN, topology parameters
    and background load."""
    path = tmp_path / "x.yaml"
    path.write_text("jobs: [{name: a, model: resnet50, workers: 2}]\n" + text)
    with pytest.raises(ConfigError, match=pattern):
        config.validate(config.load(str(path)))


def test_dilation_below_minimum_link_rate_is_rejected():
    """A dilation that slows links below MIN_RATE_MBPS fails validation naming the rate, scale and dilation."""
    from emulator.net import MIN_RATE_MBPS

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
    # a job's own compute time counts in place of its model's: resnet50 at 0.5 s is now the slowest
    jobs = (dataclasses.replace(cfg.jobs[0], compute_ms=500.0), cfg.jobs[1])
    assert config.wall_time_lower_bound_s(dataclasses.replace(cfg, jobs=jobs)) == pytest.approx(15.0, rel=1e-12)


def test_bounds_take_virtual_rates_that_only_the_dilated_shapers_bring_into_range():
    """A link of 800 Gbit/s at scale 500 is shaped at 533 Mbit/s with dilation 3; the jobs' bounds take
    its virtual-time rate, 1,600 Mbit/s, which no shaper runs at and which must not be refused."""
    from common.errors import EmulationError
    from measure.shaping import link_rates_mbps, virtual_rates_mbps
    from topo import build_topology

    g = build_topology("leaf_spine", n_leaf=1, n_spine=1, hosts_per_leaf=8, host_bw_mbps=100_000)
    spine = max(float(d["bw_mbps"]) for _, _, d in g.edges(data=True))
    assert spine == 800_000
    assert max(link_rates_mbps(g, 500, 3).values()) == pytest.approx(1600 / 3)
    assert max(virtual_rates_mbps(g, 500).values()) == pytest.approx(1600)
    with pytest.raises(EmulationError, match="outside the shapeable range"):
        link_rates_mbps(g, 500)


def test_dilation_divides_link_rates_like_scale():
    """link_rates_mbps(g, 500, 4) equals link_rates_mbps(g, 2000) on a fat-tree, edge for edge."""
    from emulator.net import link_rates_mbps
    from topo import build_topology

    g = build_topology("fat_tree", k=4)
    dilated = link_rates_mbps(g, 500, 4)
    assert dilated == link_rates_mbps(g, 2000)
    assert len(dilated) == g.number_of_edges() and set(dilated.values()) == {5.0}
    assert link_rates_mbps(g, 500) == {e: 20.0 for e in dilated}  # the default dilation is 1


# -- one rule per field, applied everywhere ---------------------------------------------------------


def write(tmp_path, content) -> str:
    """Write a config file (text as UTF-8, or raw bytes) and return its path."""
    path = tmp_path / "x.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


def rejects(over: dict, pattern: str) -> str:
    """Validate base(**over), expect a ConfigError matching ``pattern``; return its message."""
    with pytest.raises(ConfigError, match=pattern) as e:
        config.validate(config.from_dict(base(**over)))
    return str(e.value)


def test_every_field_declares_its_rule():
    """Every field of every config dataclass has a type-and-range rule in its metadata (nothing unchecked)."""
    for cls in (config.ExperimentConfig, config.TopologyConfig, config.JobConfig, config.EcnConfig):
        for f in dataclasses.fields(cls):
            assert callable(f.metadata.get("rule")), f"{cls.__name__}.{f.name} has no rule"


@pytest.mark.parametrize("content, pattern", [
    (bytes(range(256)) * 4, r"not UTF-8 text \(byte 0x80 at offset 128\)"),
    (b"name: a\x00b\n", r"a binary file \(NUL byte at offset 7\), not YAML text"),
    (b"\x89PNG\r\n\x1a\n\xff\xfe\xfd", r"not UTF-8 text \(byte 0x89 at offset 0\); save it as UTF-8"),
    ("name: d\u00e9faut\n".encode("latin-1"), r"not UTF-8 text \(byte 0xe9 at offset 7\)"),
    ("name: x\n".encode("utf-16"), r"not UTF-8 text \(byte 0xff at offset 0\)"),
])
def test_binary_and_non_utf8_files_are_one_clear_error(tmp_path, content, pattern):
    """A binary, latin-1 or UTF-16 file is a ConfigError naming the path and the first bad byte, not a traceback."""
    with pytest.raises(ConfigError, match=f"^config .*x.yaml: {pattern}"):
        config.load(write(tmp_path, content))


def test_file_larger_than_the_limit_is_rejected(tmp_path):
    """A file over MAX_FILE_BYTES is rejected before it is parsed."""
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        config.load(write(tmp_path, "#" * (config.MAX_FILE_BYTES + 1)))


def test_deep_nesting_is_rejected_without_recursion_error(tmp_path):
    """20 000 nested lists are rejected from parser events, before anything recursive sees them."""
    with pytest.raises(ConfigError, match=r"nested deeper than 10 levels at line 1"):
        config.load(write(tmp_path, "name: " + "[" * 20000 + "]" * 20000 + "\n"))
    with pytest.raises(ConfigError, match=r"nested deeper than 10 levels"):
        config.load(write(tmp_path, "jobs: " + "[" * 10 + "]" * 10 + "\n"))  # 11 with the top level


def test_alias_bomb_is_rejected(tmp_path):
    """A "billion laughs" document (9^9 values once aliases are expanded) is rejected while parsing."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    with pytest.raises(ConfigError, match=r"more than 100000 values with aliases expanded"):
        config.load(write(tmp_path, "\n".join(lines) + "\n"))


def test_aliases_and_merge_keys_within_limits_still_work(tmp_path):
    """Anchors, aliases and merge keys of reasonable size are ordinary YAML and load."""
    text = ("jobs:\n  - &job {name: a, model: resnet50, workers: 2}\n  - {<<: *job, name: b}\n"
            "policies: &p [consolidate]\n")
    cfg = config.load(write(tmp_path, text))
    config.validate(cfg)
    assert [j.name for j in cfg.jobs] == ["a", "b"] and cfg.jobs[1].model == "resnet50"


def test_duplicate_yaml_keys_are_rejected(tmp_path):
    """A key given twice in one mapping is an error (YAML would silently keep the last)."""
    with pytest.raises(ConfigError, match=r"line 3, column 1: found duplicate key 'iterations'"):
        config.load(write(tmp_path, "iterations: 5\njobs: [{name: a, model: resnet50, workers: 2}]\niterations: 0\n"))
    with pytest.raises(ConfigError, match=r"found duplicate key 'workers'"):
        config.load(write(tmp_path, "jobs: [{name: a, model: resnet50, workers: 2, workers: 3}]\n"))


@pytest.mark.parametrize("text, pattern", [
    ("seed: " + "9" * 5000 + "\n", r"a value of 5000 characters at line 1"),
    ("seed: 2024-13-01\n", r"a value cannot be read: month must be in 1..12"),
    ("name: !!python/object:os.system {}\n", r"not valid YAML at line 1, column 7: could not determine a constructor"),
])
def test_values_yaml_cannot_construct_are_one_clear_error(tmp_path, text, pattern):
    """A 5000-digit integer, an impossible date or a Python tag is a ConfigError, not a ValueError traceback."""
    with pytest.raises(ConfigError, match=pattern):
        config.load(write(tmp_path, text))


def test_messages_quote_values_briefly():
    """A huge value is quoted in at most MAX_REPR characters, and a huge integer is summarised."""
    msg = rejects({"name": "x" * 5000}, r"^config.name: 'x+\.\.\.x+' is not a valid name")
    assert len(msg) < 200
    msg = rejects({"seed": 2 ** 100_000}, r"^config.seed: <100001-bit integer> is out of range")
    assert len(msg) < 200
    nested = [[["x"] * 1000] * 1000] * 1000  # shared lists: a billion values if walked
    assert len(rejects({"name": nested}, r"^config.name: \[\[\[.*is not a string")) < 200


def test_yaml_exponent_floats_are_numbers(tmp_path):
    """``1e3`` is a float as in JSON and YAML 1.2 (YAML 1.1 would read the string '1e3')."""
    cfg = config.load(write(tmp_path, "jobs: [{name: a, model: resnet50, workers: 2}]\nscale: 5e2\n"))
    assert cfg.scale == 500.0
    config.validate(cfg)


def test_ecn_threshold_bytes_is_an_int_within_the_queue():
    """threshold_bytes: 1e30 is not an integer; a K above the queue (queue_packets x (mtu + 14)) is never
    reached; with marking off, or K given in microseconds, threshold_bytes is not held to the queue."""
    rejects({"ecn": {"threshold_bytes": 1e30}}, r"^config.ecn.threshold_bytes: 1e\+30 is not an integer")
    rejects({"ecn": {"threshold_bytes": 151401}},
            r"^config.ecn.threshold_bytes: 151401 is above the queue, so it is never reached \(an integer in "
            r"\[0, 151400\]: queue_packets 100 x \(mtu 1500 \+ 14\) bytes\)")
    rejects({"ecn": {"threshold_bytes": 1000, "max_threshold_bytes": 10 ** 6}},
            r"^config.ecn.max_threshold_bytes: 1000000 is above the queue")
    config.validate(config.from_dict(base(ecn={"threshold_bytes": 151400})))
    config.validate(config.from_dict(base(ecn={"threshold_bytes": 10 ** 6, "marking": "off"})))
    config.validate(config.from_dict(base(ecn={"threshold_bytes": 10 ** 6, "threshold_us": 100})))


LEAF_SPINE_SLOW_UPLINKS = {"kind": "leaf_spine", "n_leaf": 2, "n_spine": 1, "hosts_per_leaf": 2,
                           "oversubscription": 4}  # hosts 20 Mbit/s, uplinks 10 Mbit/s at scale 500


@pytest.mark.parametrize("dilation", [1, 3])
def test_ecn_threshold_delay_is_held_to_the_queue(dilation):
    """K as a delay is the bytes the port drains in it: 61 ms is 152 500 bytes at 20 Mbit/s, above the 151 400-byte
    queue, at any dilation (a virtual-time delay at the dilated rate is the same bytes)."""
    rejects({"ecn": {"threshold_us": 61000}, "dilation": dilation},
            r"^config.ecn.threshold_us: 61000.0 is 152500 bytes of queue at the slowest port \([0-9.]+ Mbit/s\), "
            r"above the queue, so it is never reached \(at most 60560 us: the time that port takes to drain the "
            r"queue, queue_packets 100 x \(mtu 1500 \+ 14\) = 151400 bytes\)$")
    config.validate(config.from_dict(base(ecn={"threshold_us": 60560}, dilation=dilation)))
    config.validate(config.from_dict(base(ecn={"threshold_us": 61000, "marking": "off"}, dilation=dilation)))


def test_ecn_threshold_delay_is_converted_at_the_slowest_port():
    """With 10 Mbit/s uplinks under 20 Mbit/s host links, K as a delay is checked at the uplinks: 120 ms is over
    the queue at the host ports but within it at the uplinks, where it can be reached; 122 ms is over it everywhere."""
    config.validate(config.from_dict(base(topology=LEAF_SPINE_SLOW_UPLINKS, dilation=1,
                                          ecn={"threshold_us": 120000})))
    rejects({"topology": LEAF_SPINE_SLOW_UPLINKS, "dilation": 1, "ecn": {"threshold_us": 122000}},
            r"^config.ecn.threshold_us: 122000.0 is 152500 bytes of queue at the slowest port \(10 Mbit/s\), .*"
            r"\(at most 121120 us: ")


def test_ecn_marking_ramp_longer_than_the_bpf_marker_holds_is_rejected():
    """A K..K_max ramp over MAX_RAMP_NS at the slowest port is rejected here, not when the marker starts."""
    ecn = {"threshold_bytes": 30000, "max_threshold_bytes": 150000}
    config.validate(config.from_dict(base(ecn=ecn, dilation=50)))  # 120 kB at 0.4 Mbit/s: 2.4 s
    rejects({"ecn": ecn, "dilation": 100}, r"^config.ecn.max_threshold_bytes: 150000 makes the marking ramp "
                                           r"K..K_max 4.8 s long at 0.2 Mbit/s \(the BPF marker holds at most 4 s")
    config.validate(config.from_dict(base(ecn={**ecn, "method": "red"}, dilation=100)))  # RED has no such limit


@pytest.mark.parametrize("over, pattern", [
    ({"mtu": 100000}, r"^config.mtu: 100000 is out of range \(an integer in \[576, 9000\]\)"),
    ({"mtu": 575}, r"^config.mtu: 575 is out of range"),
    ({"mtu": 1500.0}, r"^config.mtu: 1500.0 is not an integer"),
    ({"mtu": 9000, "switch_ports": "afxdp"}, r"^config.mtu: 9000 is above what AF_XDP ports carry"),
])
def test_mtu_range(over, pattern):
    """MTU is an integer in [576, 9000] (jumbo frames), and at most AF_XDP's when afxdp ports are required."""
    rejects(over, pattern)


def test_jumbo_mtu_is_accepted():
    """mtu 9000 passes with the default switch ports (auto falls back to veths above AF_XDP's MTU)."""
    from emulator.ports import resolve_port_type

    cfg = config.from_dict(base(mtu=9000))
    assert cfg.switch_ports == "auto" and config.validate(cfg).number_of_nodes() > 0
    kind, why = resolve_port_type(cfg.switch_ports, cfg.mtu, "user", None)
    assert kind == "system" and "MTU 9000" in why


@pytest.mark.parametrize("over, pattern", [
    ({"scale": 1e12}, r"^config.scale: 1000000000000.0 is out of range \(a finite number in \(0, 10000000\]\)"),
    ({"scale": 1e6}, r"^config.topology: link .* = 0.00333333 Mbit/s is outside the shapeable range \[0.1, 1000\]"),
    ({"topology": {"kind": "fat_tree", "k": 4, "bw_mbps": 1e-6}}, r"^config.topology: link .* outside the shapeable"),
    ({"topology": {"kind": "fat_tree", "k": 4, "bw_mbps": 1e9}}, r"^config.topology: link .* outside the shapeable"),
])
def test_scale_and_link_rates_out_of_range(over, pattern):
    """A huge scale is out of range; a scale or bw_mbps giving emulated rates outside [0.1, 1000] Mbit/s is
    rejected naming the link."""
    rejects(over, pattern)


def test_unknown_congestion_control_is_rejected():
    """congestion_control must be a Linux TCP congestion-control module name; the message lists them."""
    rejects({"congestion_control": "cubc"}, r"^config.congestion_control: 'cubc' is unknown \(valid: reno, cubic, "
                                            r"dctcp, .*; did you mean 'cubic'\?\)")
    rejects({"congestion_control": "cubic; reboot"}, r"'cubic; reboot' is not a valid name")
    config.validate(config.from_dict(base(congestion_control="dctcp")))


@pytest.mark.parametrize("over, pattern", [
    ({"queue_packets": 1e12}, r"^config.queue_packets: 1000000000000.0 is not an integer \(an integer in \[1, 1"),
    ({"queue_packets": 100001}, r"^config.queue_packets: 100001 is out of range"),
    ({"iterations": True}, r"^config.iterations: True is not an integer"),
    ({"iterations": 10.0}, r"^config.iterations: 10.0 is not an integer"),
    ({"iterations": 100001}, r"^config.iterations: 100001 is out of range \(an integer in \[1, 100000\]\)"),
    ({"warmup_iterations": -1}, r"^config.warmup_iterations: -1 is out of range"),
    ({"seed": -1}, r"^config.seed: -1 is out of range \(an integer in \[0, 4294967295\]\)"),
    ({"seed": 2 ** 32}, r"^config.seed: 4294967296 is out of range"),
    ({"seed": False}, r"^config.seed: False is not an integer"),
    ({"jobs": [{"name": "a", "model": "resnet50", "workers": 1.5}]}, r"^config.jobs\[0\].workers: 1.5 is not an int"),
    ({"jobs": [{"name": "a", "model": "resnet50", "workers": True}]}, r"^config.jobs\[0\].workers: True is not an"),
    ({"jobs": [{"name": "a", "model": "resnet50", "workers": 0}]}, r"^config.jobs\[0\].workers: 0 is out of range"),
    ({"background": {"h1": True}}, r"^config.background.h1: True is not an integer"),
    ({"background": {"h1": 5}}, r"^config.background.h1: 5 is more GPUs than the machine has \(an integer in \[0, 4\]"),
    ({"ecn": {"max_threshold_bytes": 2.5}}, r"^config.ecn.max_threshold_bytes: 2.5 is not an integer"),
    ({"ecn": {"max_probability": 0}}, r"^config.ecn.max_probability: 0 is out of range \(a finite number in \(0, 1\]"),
    ({"ecn": {"sample_interval_s": 0.01}}, r"^config.ecn.sample_interval_s: 0.01 is out of range"),
    ({"stats_interval_s": True}, r"^config.stats_interval_s: True is not a number"),
    ({"job_timeout_s": 0.5}, r"^config.job_timeout_s: 0.5 is out of range"),
    ({"dilation": 10001}, r"^config.dilation: 10001 is out of range"),
])
def test_numbers_have_a_type_and_a_range(over, pattern):
    """Integers are ints (not bools, not floats), numbers are finite, and both lie in a stated range."""
    rejects(over, pattern)


@pytest.mark.parametrize("name", ["", "a/b", "../../../../tmp/x/pwned", ".hidden", " a", "a b", "j\u00f6b", "x" * 65,
                                  "a\nb", 5, None])
def test_job_names_are_safe_file_name_parts(name):
    """Job names name worker output files: empty names, '/', '..', leading dots, spaces, non-ASCII and
    more than 64 characters are rejected."""
    msg = rejects({"jobs": [{"name": name, "model": "resnet50", "workers": 2}]}, r"^config.jobs\[0\].name: ")
    assert "is not a valid name" in msg or "is not a string" in msg
    assert "\n" not in msg


@pytest.mark.parametrize("over, pattern", [
    ({"name": "../x"}, r"^config.name: '../x' is not a valid name"),
    ({"background": {"../h1": 1}}, r"^config.background key: '../h1' is not a valid name"),
    ({"background": {"h99": 1}}, r"^config.background: 'h99' is not a machine of the topology \(machines: h1, h2"),
    ({"background": {"e1": 1}}, r"^config.background: 'e1' is not a machine of the topology"),
    ({"topology": {"kind": "fat/tree", "k": 4}}, r"^config.topology.kind: 'fat/tree' is not a valid name"),
    ({"topology": {"kind": "fat_tre", "k": 4}}, r"^config.topology.kind: 'fat_tre' is unknown \(valid: fat_tree, "
                                                r"file, leaf_spine; did you mean 'fat_tree'\?\)"),
    ({"jobs": [{"name": "a", "model": "../resnet50", "workers": 2}]}, r"^config.jobs\[0\].model: '../resnet50' is not"),
    ({"jobs": [{"name": "a", "model": "resnet5", "workers": 2}]}, r"^config.jobs\[0\].model: 'resnet5' is unknown"),
    ({"jobs": [{"name": "a", "model": "resnet50", "workers": 2, "collective": "r/ng"}]},
     r"^config.jobs\[0\].collective: 'r/ng' is not a valid name"),
    ({"policies": ["../random"]}, r"^config.policies\[0\]: '../random' is not a valid policy spec"),
    ({"policies": ["random,seed=../x"]}, r"^config.policies\[0\]: 'random,seed=../x' is not a valid policy spec"),
    ({"policies": []}, r"^config.policies: 0 policy specs given \(a list of 1 to 64 policy specs\)"),
    ({"results_dir": ""}, r"^config.results_dir: '' is empty"),
    ({"results_dir": "a\x00b"}, r"^config.results_dir: 'a\\x00b' has control characters"),
    ({"results_dir": "r" * 1025}, r"^config.results_dir: 'r+\.\.\.r+' has 1025 characters"),
    ({"results_dir": 5}, r"^config.results_dir: 5 is not a string"),
])
def test_names_and_paths_are_checked(over, pattern):
    """Experiment, machine, topology, model, collective and policy names match the safe pattern and then the
    registries; results_dir is a bounded path without control characters."""
    rejects(over, pattern)


@pytest.mark.parametrize("policies, pattern", [
    (["all", "random"], r"^config.policies: 'random' would run twice, into one directory \(list each policy once; "
                        r"'all' is cassini, comb, consolidate, "),
    (["random", "random"], r"^config.policies: 'random' would run twice, into one directory \(list each policy "
                           r"once\)$"),
    (["random", " random "], r"' random ' would run twice"),
    (["random,strict_order=true", "random, strict_order=True"], r"'random, strict_order=True' would run twice"),
    (["all", "all"], r"would run twice"),
])
def test_duplicate_policies_are_rejected(policies, pattern):
    """A policy listed twice, also through 'all' or with the same keywords spelt differently, is rejected
    (both runs would write one directory)."""
    rejects({"policies": policies}, pattern)


def test_distinct_specs_of_one_policy_are_allowed():
    """The same policy with different keywords is two experiments, not a duplicate."""
    cfg = config.from_dict(base(policies=["random", "random,strict_order=true"]))
    assert config.validate(cfg).number_of_nodes() > 0
    assert config.policy_specs(cfg) == ["random", "random,strict_order=true"]


class AnyKeywordsPolicy(PlacementPolicy):
    """A policy that takes any keyword and places nothing: spec strings beyond the registered policies' keywords."""

    def __init__(self, seed: int = 0, **keywords):
        super().__init__(seed)

    def place(self, pending, view):
        return []


def test_specs_sharing_a_results_directory_are_rejected(monkeypatch):
    """Two distinct specs whose results directory names (common.specs.safe_name: ',' becomes '_') coincide are
    rejected, naming both specs and the directory."""
    from placement import POLICIES

    monkeypatch.setitem(POLICIES, "x", AnyKeywordsPolicy)
    rejects({"policies": ["x,a=b_c,d=e", "x,a=b,c_d=e"]},
            r"^config.policies: 'x,a=b,c_d=e' would write into the results directory 'x_a=b_c_d=e' of "
            r"'x,a=b_c,d=e' \(each spec needs its own directory; ',' and spaces become '_' in its name\)$")
    config.validate(config.from_dict(base(policies=["x,a=b_c,d=e", "x,a=b_c,d=f"])))


@pytest.mark.parametrize("params, pattern", [
    ({"k": 4, "bw_mbps": [1]}, r"^config.topology.bw_mbps: \[1\] is not a finite number or a string"),
    ({"k": 4, "bw_mbps": {"a": 1}}, r"^config.topology.bw_mbps: \{'a': 1\} is not a finite"),
    ({"k": True}, r"^config.topology.k: True is not a finite number or a string"),
    ({"k": None}, r"^config.topology.k: None is not a finite number or a string"),
    ({"k": 1e300}, r"^config.topology.k: 1e\+300 is not a finite number or a string \(a finite number of "
                   r"magnitude <= 1e\+12"),
    ({"k": 4, "name": "x" * 1025}, r"^config.topology.name: 'x+\.\.\.x+' has 1025 characters"),
    ({"k": 4, "k2": 1}, r"^config.topology: unknown parameter\(s\) 'k2' for topology 'fat_tree'; valid: k, "),
    ({"k": 4, "bad key": 1}, r"^config.topology key: 'bad key' is not a valid name \(an identifier"),
    ({"k": "4"}, r"^config.topology: fat-tree k must be an even integer >= 2 .*got k='4'"),
    ({"k": 4, "name": 5}, r"^config.topology: invalid topology: graph attribute 'name' must be a non-empty str"),
])
def test_topology_params_are_bounded_scalars_the_builder_knows(params, pattern):
    """Each builder parameter is a finite number or a short string; names and ranges are the builder's."""
    rejects({"topology": {"kind": "fat_tree", **params}}, pattern)


def test_topology_builder_type_error_is_a_config_error():
    """A builder that fails with TypeError on a parameter of the right shape gives a ConfigError."""
    rejects({"topology": {"kind": "file", "path": 5}},
            r"^config.topology: file cannot use its parameters: expected str, bytes or os.PathLike object, not int")


@pytest.mark.parametrize("topology, pattern", [
    ({"kind": "leaf_spine", "n_leaf": 2, "n_spine": 2000, "hosts_per_leaf": 2},
     r"^config.topology: leaf_spine n_leaf=2, n_spine=2000, hosts_per_leaf=2 is too large: 2,002 switches; "
     r"the emulator holds at most 4,096 machines, 1,024 switches and 16,384 links "
     r"\(the simulator holds up to 16,384 machines, 4,096 switches and 65,536 links\)$"),
    ({"kind": "fat_tree", "k": 26}, r"^config.topology: fat_tree k=26 is too large: 4,394 machines; "),
    ({"kind": "fat_tree", "k": 4, "gpus_per_machine": 65},
     r"^config.topology: gpus_per_machine must be an integer in 1..64, got 65$"),
])
def test_topology_sizes_are_bounded(topology, pattern):
    """A topology beyond the size limits (machines, switches, links, GPUs per machine) is a one-line ConfigError
    naming the counts and the limits."""
    rejects({"topology": topology}, pattern)


@pytest.mark.parametrize("content, pattern", [
    (None, r"a character device, not a regular file$"),
    (b"\xff\xfe{}", r"not UTF-8 text \(byte 0xff at offset 0\)$"),
    (b"{not json", r"not JSON: Expecting property name enclosed in double quotes: line 1 column 2 \(char 1\)$"),
    (b"[" * 100_000, r"not usable JSON: RecursionError: "),
])
def test_topology_file_must_be_a_regular_json_file(tmp_path, content, pattern):
    """kind: file reads only a regular file of UTF-8 JSON (/dev/null: a device, so never /dev/zero either);
    anything else is a one-line ConfigError naming the path."""
    path = "/dev/null" if content is None else str(tmp_path / "topology.json")
    if content is not None:
        (tmp_path / "topology.json").write_bytes(content)
    msg = rejects({"topology": {"kind": "file", "path": path}},
                  rf"^config.topology: cannot read topology file {path}: {pattern}")
    assert len(msg.splitlines()) == 1


def test_fifos_are_refused_without_blocking(tmp_path):
    """A FIFO as the config file or as the topology file is refused as not a regular file; nothing waits for a
    writer."""
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    error = read_fifo_within(config.load, fifo)
    assert isinstance(error, ConfigError)
    assert str(error) == f"config {fifo}: cannot read it: a FIFO, not a regular file"
    error = read_fifo_within(lambda path: config.validate(config.from_dict(base(topology={"kind": "file",
                                                                                          "path": path}))), fifo)
    assert isinstance(error, ConfigError)
    assert str(error) == f"config.topology: cannot read topology file {fifo}: a FIFO, not a regular file"


@pytest.mark.parametrize("path, kind", [("/dev/null", "a character device"), (None, "a directory")])
def test_config_file_must_be_a_regular_file(tmp_path, path, kind):
    """A device or a directory given as the config file is refused before it is read."""
    path = path or str(tmp_path)
    with pytest.raises(ConfigError, match=rf"^config {path}: cannot read it: {kind}, not a regular file$"):
        config.load(path)


def test_overrides_applied_with_replace_are_validated():
    """Changes made with dataclasses.replace (the command-line overrides) meet the same rules as a file."""
    cfg = config.from_dict(base())
    for change, pattern in [({"iterations": 0}, r"^config.iterations: 0 is out of range"),
                            ({"iterations": "3"}, r"^config.iterations: '3' is not an integer"),
                            ({"policies": ("nope",)}, r"^config.policies: unknown placement policy 'nope'"),
                            ({"policies": ("consolidate", "consolidate")}, r"'consolidate' would run twice"),
                            ({"results_dir": ""}, r"^config.results_dir: '' is empty"),
                            ({"jobs": ()},
                             r"^config.jobs: 0 jobs given \(a list of 1 to 1000 jobs, or a trace: section\)")]:
        with pytest.raises(ConfigError, match=pattern):
            config.validate(dataclasses.replace(cfg, **change))


@pytest.mark.parametrize("text, pattern", [
    ("name: t\nnam: u\n", r"^config: unknown key 'nam' \(did you mean 'name'\?\)"),
    ("ecn: {marking: off, markng: on}\n", r"^config.ecn: unknown key 'markng' \(did you mean 'marking'\?\)"),
    ("jobs: [{name: a, model: resnet50, workers: 2, colective: ring}]\n",
     r"^config.jobs\[0\]: unknown key 'colective' \(did you mean 'collective'\?\)"),
    ("ecn: [1]\n", r"^config.ecn: \[1\] is not a mapping \(keys: marking, method, "),
    ("jobs: [5]\n",
     r"^config.jobs\[0\]: 5 is not a mapping \(keys: name, model, workers, collective, arrival_s, machines, "
     r"compute_ms\)"),
    ("jobs: {name: a}\n", r"^config.jobs: \{'name': 'a'\} is not a list \(a list of 0 to 1000 jobs\)"),
    ("jobs: [{model: resnet50, workers: 2}]\n", r"^config.jobs\[0\]: missing required key 'name'"),
    ("background: [h1]\n", r"^config.background: \['h1'\] is not a mapping"),
    ("topology: fat_tree\n", r"^config.topology: expected a mapping with a 'kind' key"),
])
def test_structure_errors_name_the_path(tmp_path, text, pattern):
    """Unknown or missing keys and sections of the wrong shape are errors at every level, naming the path."""
    if "jobs" not in text:
        text += "jobs: [{name: a, model: resnet50, workers: 2}]\n"
    with pytest.raises(ConfigError, match=pattern):
        config.validate(config.load(write(tmp_path, text)))


@pytest.mark.parametrize("text, pattern", [
    ("simulator: {latency_us: -1}\n", r"^config.simulator.latency_us: -1 is out of range"),
    ("simulator: {latency_us: .nan}\n", r"^config.simulator.latency_us: nan is not finite"),
    ("simulator: {headers: 1}\n", r"^config.simulator.headers: 1 is not a boolean \(true or false\)"),
    ("simulator: {headers: 'yes'}\n", r"^config.simulator.headers: 'yes' is not a boolean"),
    ("simulator: {latency: 5}\n", r"^config.simulator: unknown key 'latency' \(did you mean 'latency_us'\?\)"),
])
def test_simulator_options_are_checked(tmp_path, text, pattern):
    """The simulator's options meet the same rules as every other section."""
    text += "jobs: [{name: a, model: resnet50, workers: 2}]\n"
    with pytest.raises(ConfigError, match=pattern):
        config.validate(config.load(write(tmp_path, text)))


def test_simulator_options_round_trip(tmp_path):
    """Defaults: no latency, headers counted; a config's values survive to_dict and load."""
    cfg = config.load(write(tmp_path, "simulator: {latency_us: 250, headers: false}\n"
                                      "jobs: [{name: a, model: resnet50, workers: 2}]\n"))
    config.validate(cfg)
    assert (cfg.simulator.latency_us, cfg.simulator.headers) == (250.0, False)
    assert config.ExperimentConfig().simulator == config.SimulatorConfig(0.0, True, False)
    again = config.from_dict(json.loads(json.dumps(config.to_dict(cfg))))
    assert again.simulator == cfg.simulator


CLUSTER_ECN_OFF = {"ecn": {"marking": "off"}}


@pytest.mark.parametrize("over,pattern", [
    ({"cluster": {"servers": ["localhost"]}, **CLUSTER_ECN_OFF}, r"'localhost' is this machine"),
    ({"cluster": {"servers": ["h2", "h2"]}, **CLUSTER_ECN_OFF}, r"names a server twice"),
    ({"cluster": {"servers": ["a", "b", "c", "d"]}, **CLUSTER_ECN_OFF}, r"more servers than the topology's 4"),
    ({"cluster": {"servers": ["h 2"]}, **CLUSTER_ECN_OFF}, r"servers\[0\]: 'h 2' is not a valid name"),
    ({"cluster": {"servers": ["h2"]}}, r"cluster mode runs without ecn.marking: required"),
    ({"cluster": {"servers": ["h2"]}, "switch_ports": "afxdp", **CLUSTER_ECN_OFF}, r"without switch_ports: afxdp"),
    ({"cluster": {"servers": ["h2"]}, "container": {"engine": "docker"}, **CLUSTER_ECN_OFF},
     r"without container.engine: docker"),
    ({"cluster": {"servers": ["h2"]}, "jobs": [{"name": "a", "model": "resnet50", "workers": 4,
                                                "collective": "ina"}], **CLUSTER_ECN_OFF}, r"without INA jobs"),
    ({"cluster": {"servres": ["h2"]}}, r"did you mean 'servers'"),
])
def test_cluster_mode_config_errors_name_the_problem(over, pattern):
    """A cluster section naming this machine, a server twice, more servers than racks or pods, a
    malformed name, or asking for what runs on one machine only (a required ECN marker, AF_XDP
    ports, Docker workers, INA) is one ConfigError naming it."""
    with pytest.raises(ConfigError, match=pattern):
        config.validate(config.from_dict(base(**over)))


def test_a_cluster_config_validates_round_trips_and_is_ignored_by_the_simulator(tmp_path):
    """Servers with ECN optional validate, the resolved config keeps them, and the simulator back end
    (which runs on one machine) does not check them."""
    cfg = config.absolute_paths(config.from_dict(base(cluster={"servers": ["h2", "10.1.2.3"], "ssh_config": "/etc/x"},
                                                      ecn={"marking": "optional"})), "/runs")
    config.validate(cfg)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.to_dict(cfg)))
    assert config.load(str(path)) == cfg and cfg.cluster.servers == ("h2", "10.1.2.3")
    config.validate(config.from_dict(base(cluster={"servers": ["h2"]})), backend="sim")


def test_ina_pat_is_declared_or_not_and_the_models_take_1_tbps_when_not():
    from experiment.config import schema as config

    base = {"jobs": [{"name": "a", "model": "resnet50", "workers": 2, "collective": "ina"}]}
    assert config.from_dict(base).ina.pat_gbps is None
    assert config.from_dict(base).ina.model_pat_gbps == 1000.0
    assert config.from_dict({**base, "ina": {"pat_gbps": 14}}).ina.model_pat_gbps == 14.0
    assert config.from_dict({**base, "ina": {"pat_gbps": None}}).ina.pat_gbps is None
    with pytest.raises(ConfigError, match=r"config.ina.pat_gbps: 'fast' is not a number \(a finite number in "
                                          r"\[0, 1000000000\], or null"):
        config.validate(config.from_dict({**base, "ina": {"pat_gbps": "fast"}}))
