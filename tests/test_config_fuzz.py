"""Hostile inputs to `run_testbed.py check`: malformed configs derived from experiments/default.yaml.

Each case mutates the default experiment (types, ranges, NaN and infinities, names, unknown keys at every
level, duplicates, cross-field limits) or its file (encodings, binary bytes, size, nesting depth, aliases).
Every one must end with exit code 2 and exactly one line on stderr starting with ``error: config``, never
a traceback. Most run in-process through ``run_testbed.main``; a sample runs as real subprocesses.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import random
import signal
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT

DEFAULT = os.path.join(ROOT, "experiments", "default.yaml")
with open(DEFAULT, encoding="utf-8") as _f:
    DEFAULT_TEXT = _f.read()
POLICIES_LINE = next(line for line in DEFAULT_TEXT.splitlines() if line.startswith("policies: "))
BASE = yaml.safe_load(DEFAULT_TEXT)

INT_FIELDS = [("seed",), ("iterations",), ("warmup_iterations",), ("mtu",), ("queue_packets",),
              ("ecn", "threshold_bytes"), ("ecn", "max_threshold_bytes"), ("jobs", 0, "workers"),
              ("background", "h1"), ("topology", "k"), ("topology", "gpus_per_machine")]
FLOAT_FIELDS = [("scale",), ("dilation",), ("stats_interval_s",), ("job_timeout_s",), ("time_limit_s",),
                ("ecn", "threshold_us"), ("ecn", "max_probability"), ("ecn", "sample_interval_s"),
                ("topology", "bw_mbps")]
BAD_NUMBERS = {"str": "abc", "bool": True, "null": None, "list": [1], "map": {"a": 1}, "nan": float("nan"),
               "inf": float("inf"), "-inf": float("-inf"), "neg": -1, "huge": 1e300}
NAME_FIELDS = [("name",), ("jobs", 0, "name"), ("jobs", 0, "model"), ("jobs", 0, "collective"), ("topology", "kind"),
               ("congestion_control",), ("mode",)]
CHOICE_FIELDS = [("runtime",), ("switch_ports",), ("routing",), ("ecn", "marking"), ("ecn", "method")]
BAD_STRINGS = {"int": 5, "bool": True, "null": None, "list": ["a"], "map": {"a": 1}, "empty": ""}
BAD_NAMES = {"dotdot": "../x", "slash": "a/b", "traversal": "../../../../tmp/x/pwned", "unicode": "j\u00f6b",
             "rtl": "a\u202eb", "space": " a", "newline": "a\nb", "long": "x" * 65, "huge": "x" * 5000}


def dump(d) -> str:
    """A config dict as YAML text."""
    return yaml.safe_dump(d, sort_keys=False, allow_unicode=True)


def mutate(path: tuple, value) -> str:
    """The default config with the value at ``path`` replaced."""
    d = copy.deepcopy(BASE)
    node = d
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return dump(d)


def patched(**top) -> str:
    """The default config with top-level keys set."""
    return dump({**copy.deepcopy(BASE), **top})


def label(path: tuple) -> str:
    """A case label for a path: ``jobs.0.name``."""
    return ".".join(map(str, path))


def alias_bomb(levels: int = 9) -> str:
    """A "billion laughs" document: 9**levels values once its aliases are expanded."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def malformed_cases() -> list[tuple[str, str | bytes]]:
    """Every malformed config: (label, file content)."""
    cases = []
    # Types, ranges and non-finite values of every numeric field.
    for path in INT_FIELDS + FLOAT_FIELDS:
        cases += [(f"{label(path)}={name}", mutate(path, v)) for name, v in BAD_NUMBERS.items()]
    cases += [(f"{label(path)}=float", mutate(path, 2.5)) for path in INT_FIELDS]
    # YAML's own spellings of NaN and infinity.
    for key, spelling in [("job_timeout_s", ".NaN"), ("stats_interval_s", ".NAN"), ("time_limit_s", ".INF"),
                          ("dilation", "+.inf")]:
        cases.append((f"yaml:{key}={spelling}", DEFAULT_TEXT + f"{key}: {spelling}\n"))
    cases.append(("yaml:scale=-.Inf", DEFAULT_TEXT.replace("scale: 500", "scale: -.Inf")))
    # Types of every string field, and unsafe names.
    for path in NAME_FIELDS + CHOICE_FIELDS + [("results_dir",)]:
        cases += [(f"{label(path)}={name}", mutate(path, v)) for name, v in BAD_STRINGS.items()]
    for path in NAME_FIELDS:
        cases += [(f"{label(path)}={name}", mutate(path, v)) for name, v in BAD_NAMES.items()]
    cases += [("results_dir=nul", patched(results_dir="a\0b")), ("results_dir=long", patched(results_dir="r" * 2000))]
    # Values out of range or unknown to the registries.
    cases += [
        ("mtu=100000", patched(mtu=100000)), ("queue_packets=1e12", DEFAULT_TEXT + "queue_packets: 1e12\n"),
        ("threshold_bytes=1e30", DEFAULT_TEXT.replace("threshold_bytes: 30000", "threshold_bytes: 1e30")),
        ("scale=1e12", DEFAULT_TEXT.replace("scale: 500", "scale: 1e12")),
        ("bw_mbps=1e-6", DEFAULT_TEXT.replace("bw_mbps: 10000", "bw_mbps: 1e-6")),
        ("scale=5", patched(scale=5, dilation=1)), ("cc=unknown", patched(congestion_control="cubicc")),
        ("seed=2**32", patched(seed=2 ** 32)), ("iterations=0", patched(iterations=0)),
        ("iterations=1e6", patched(iterations=10 ** 6)), ("topology.k=3", mutate(("topology", "k"), 3)),
        ("topology.kind=file", mutate(("topology", "kind"), "file")),
    ]
    # Containers of the wrong shape, size or content.
    job = BASE["jobs"][0]
    cases += [(f"jobs={name}", patched(jobs=v)) for name, v in
              {"empty": [], "map": {}, "str": "x", "ints": [5], "nested": [[]], "null": None,
               "missing-name": [{k: v for k, v in job.items() if k != "name"}],
               "dup-name": [job, {**job, "model": "resnet50"}], "too-big": [{**job, "workers": 65}],
               "too-many": [{**job, "name": f"j{i}", "workers": 1} for i in range(1001)]}.items()]
    cases += [(f"policies={name}", patched(policies=v)) for name, v in
              {"empty": [], "unknown": ["nope"], "all+random": ["all", "random"], "twice": ["random", "random"],
               "space": ["x y"], "int": [5], "nested": [[]], "map": {"a": 1}, "traversal": ["../random"],
               "bad-kwarg": ["random,nope=1"], "too-many": [f"random,x{i}=1" for i in range(65)]}.items()]
    cases += [(f"background={name}", patched(background=v)) for name, v in
              {"list": ["h1"], "str": "x", "unknown": {"h99": 1}, "switch": {"e1": 1}, "traversal": {"../h1": 1},
               "over": {"h1": 5}, "int-key": {1: 1}, "null-key": {None: 1}}.items()]
    topo = BASE["topology"]
    cases += [(f"topology={name}", patched(topology=v)) for name, v in
              {"str": "fat_tree", "list": [], "no-kind": {"k": 4}, "kind-int": {**topo, "kind": 5},
               "nested-param": {**topo, "k": {"a": 1}}, "file-missing": {"kind": "file", "path": "/nonexistent"},
               "file-int": {"kind": "file", "path": 5}, "name-int": {**topo, "name": 5},
               "file-dev-null": {"kind": "file", "path": "/dev/null"}, "file-dir": {"kind": "file", "path": "/"},
               "k=26": {**topo, "k": 26}, "gpus=65": {**topo, "gpus_per_machine": 65},
               "2000-spines": {"kind": "leaf_spine", "n_leaf": 2, "n_spine": 2000, "hosts_per_leaf": 2}}.items()]
    cases += [("ecn=list", patched(ecn=[1])), ("ecn=str", patched(ecn="on"))]
    # Unknown keys at every level.
    cases += [
        ("unknown:top", patched(iteration=3)),
        ("unknown:ecn", mutate(("ecn", "treshold_bytes"), 1)),
        ("unknown:job", mutate(("jobs", 0, "gpus"), 2)),
        ("unknown:topology", mutate(("topology", "radix"), 4)),
        ("unknown:background", mutate(("background", "h0"), 1)),
        ("unknown:int-key", DEFAULT_TEXT + "1: 2\n"),
    ]
    # Limits that involve several fields.
    cases += [
        ("afxdp+jumbo", patched(switch_ports="afxdp", mtu=9000)),
        ("K>queue", patched(queue_packets=10)),
        ("Kmax<K", mutate(("ecn", "max_threshold_bytes"), 1000)),
        ("K-delay>queue", mutate(("ecn", "threshold_us"), 61000)),
        ("ramp", patched(ecn={**BASE["ecn"], "max_threshold_bytes": 150000}, dilation=100)),
        ("bbr+ecn", patched(congestion_control="bbr")),
        ("train+vgg", patched(mode="train")),
        ("time-limit", patched(scale=10, dilation=1000)),
        ("no-jobs", dump({k: v for k, v in BASE.items() if k != "jobs"})),
    ]
    # The file itself: encodings, binary bytes, size.
    cases += [
        ("binary", random.Random(7).randbytes(4096)),
        ("latin-1", DEFAULT_TEXT.replace("name: default", "name: d\u00e9faut").encode("latin-1")),
        ("utf-16", DEFAULT_TEXT.encode("utf-16")),
        ("nul-byte", DEFAULT_TEXT.replace("name: default", "name: de\0fault").encode()),
        ("png", b"\x89PNG\r\n\x1a\n" + bytes(range(256))),
        ("over-1MiB", DEFAULT_TEXT + "#" * (1 << 20) + "\n"),
        ("empty", ""), ("comment-only", "# nothing\n"), ("top-list", "- 1\n- 2\n"), ("top-scalar", "42\n"),
    ]
    # YAML structure: depth, aliases, duplicates, tags, syntax.
    cases += [
        ("deep-20000", DEFAULT_TEXT + "x: " + "[" * 20000 + "]" * 20000 + "\n"),
        ("deep-11", DEFAULT_TEXT.replace(POLICIES_LINE, "policies: " + "[" * 10 + "all" + "]" * 10)),
        ("alias-bomb", alias_bomb()),
        ("alias-bomb-in-name", alias_bomb(6) + "name: *a5\n"),
        ("alias-recursive", DEFAULT_TEXT.replace(POLICIES_LINE, "policies: &p [*p]")),
        ("alias-undefined", DEFAULT_TEXT.replace(POLICIES_LINE, "policies: *nope")),
        ("merge-non-mapping", DEFAULT_TEXT + "ecn2: {<<: 5}\n"),
        ("dup-key-top", DEFAULT_TEXT + "iterations: 0\n"),
        ("dup-key-job", DEFAULT_TEXT.replace("workers: 8,", "workers: 8, workers: 9,")),
        ("syntax", DEFAULT_TEXT.replace(POLICIES_LINE, "policies: [all")),
        ("tab-indent", DEFAULT_TEXT.replace("  kind: fat_tree", "\tkind: fat_tree")),
        ("two-documents", DEFAULT_TEXT + "---\nname: again\n"),
        ("python-tag", DEFAULT_TEXT.replace("name: default", "name: !!python/object/apply:os.system [id]")),
        ("custom-tag", DEFAULT_TEXT.replace("name: default", "name: !evil" + "x" * 3000 + " default")),
        ("binary-tag", DEFAULT_TEXT.replace("name: default", "name: !!binary aGVsbG8=")),
        ("set-tag", DEFAULT_TEXT.replace(POLICIES_LINE, "policies: !!set {all: null}")),
        ("bad-date", DEFAULT_TEXT.replace("seed: 1", "seed: 2024-13-01")),
        ("date", DEFAULT_TEXT.replace("seed: 1", "seed: 2024-01-01")),
        ("int-5000-digits", DEFAULT_TEXT.replace("seed: 1", "seed: " + "9" * 5000)),
        ("int-4000-bits", DEFAULT_TEXT.replace("seed: 1", "seed: 0b" + "1" * 4000)),
    ]
    return cases


CASES = malformed_cases()
# A sample through real subprocesses: the riskiest files and a spread of the rest.
SUBPROCESS_LABELS = ["binary", "latin-1", "deep-20000", "alias-bomb", "jobs.0.name=traversal", "dup-key-top",
                     "int-5000-digits", "policies=all+random", "ecn.threshold_us=nan", "topology=file-int"]


@pytest.fixture
def check(monkeypatch, capsys, tmp_path):
    """Run ``run_testbed.py check`` on content in this process; return (exit code, stderr)."""
    monkeypatch.setenv("TESTBED_NO_VENV_REEXEC", "1")
    main = importlib.import_module("run_testbed").main
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # keep main's signal handlers out of pytest

    def run(content: str | bytes) -> tuple[int, str]:
        path = tmp_path / "config.yaml"
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        capsys.readouterr()
        code = main(["check", str(path)])
        return code, capsys.readouterr().err

    return run


def assert_one_config_error(code: int, err: str) -> None:
    """Exit code 2, exactly one non-empty line on stderr starting with ``error: config``, no traceback."""
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: config") and lines[0].strip() != "error: config", err
    assert "Traceback" not in err
    assert len(lines[0]) < 1000, err


def test_enough_malformed_cases():
    """The fuzz set holds at least 100 distinct malformed configs, and the subprocess sample is in it."""
    labels = [name for name, _ in CASES]
    assert len(CASES) >= 100 and len(set(labels)) == len(labels)
    assert set(SUBPROCESS_LABELS) <= set(labels)


@pytest.mark.parametrize("name, content", CASES, ids=[name for name, _ in CASES])
def test_malformed_config_is_one_line_error(check, name, content):
    """A malformed config gives exit code 2 and one `error: config...` line on stderr, never a traceback."""
    assert_one_config_error(*check(content))


@pytest.mark.parametrize("name", SUBPROCESS_LABELS)
def test_malformed_config_through_the_real_cli(tmp_path, name):
    """The same through `python3 run_testbed.py check FILE` as a subprocess (the real command-line path)."""
    content = dict(CASES)[name]
    path = tmp_path / "config.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    cp = subprocess.run([sys.executable, os.path.join(ROOT, "run_testbed.py"), "check", str(path)],
                        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert_one_config_error(cp.returncode, cp.stderr)
    assert "Traceback" not in cp.stdout


def resolved_default() -> str:
    """The default config as a run writes it (config.json)."""
    from experiment.config import schema as config

    return json.dumps(config.to_dict(config.load(DEFAULT)))


@pytest.mark.parametrize("name, content", [
    ("default", DEFAULT_TEXT),
    ("jumbo-mtu", DEFAULT_TEXT + "mtu: 9000\n"),
    ("exponent-floats", DEFAULT_TEXT.replace("scale: 500", "scale: 5e2").replace("bw_mbps: 10000", "bw_mbps: 1e4")),
    ("anchors-and-merge", DEFAULT_TEXT.replace(
        "  - {name: vgg-a, model: vgg16, workers: 8, collective: ring}",
        "  - &vgg {name: vgg-a, model: vgg16, workers: 8, collective: ring}\n  - {<<: *vgg, name: vgg-b, workers: 2}")),
    ("leaf-spine", patched(topology={"kind": "leaf_spine", "n_leaf": 4, "n_spine": 2, "hosts_per_leaf": 4},
                           policies=["consolidate", "random,strict_order=true"])),
    ("bbr-without-ecn", patched(congestion_control="bbr", ecn={"marking": "off"})),
    ("utf-8-bom-and-comments", "\ufeff# d\u00e9faut, in UTF-8\n" + DEFAULT_TEXT),
    ("resolved-json", None),
])
def test_valid_configs_still_pass(check, name, content):
    """The default experiment and valid variants of it (jumbo frames, 1e3 floats, anchors, leaf-spine, bbr with
    ECN off, a BOM, the resolved config.json) pass `check`."""
    code, err = check(resolved_default() if content is None else content)
    assert code == 0 and err == "", err
