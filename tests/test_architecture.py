"""The product's package structure: the import graph of its top-level packages has no cycle, and the
layers the architecture names hold (the experiment package never imports the emulator; only the
emulator imports Mininet and the worker runtime; the pure packages import neither a back end nor the
experiment; the experiment's subpackages import only those below them)."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import networkx as nx
from conftest import REPO

PACKAGES = ("common", "congestion", "backend", "measure", "topo", "placement", "scheduling", "sim", "jobs", "ina",
            "workers", "controller", "experiment", "emulator", "vm", "reproduce")
"""The product's top-level packages (``run_testbed.py`` sits above them all)."""

PURE = ("common", "congestion", "backend", "measure", "topo", "placement", "scheduling", "sim")
"""Packages below both back ends and the experiment: they import none of ``experiment``, ``emulator``."""

RUNTIME_USERS = ("emulator",)
"""The packages that may import ``workers``, the runtime that runs a job's ranks as processes (sockets,
torch): the emulator alone starts workers. Every other package, ``jobs`` among them (the pure description
of a job: models, patterns, steps, records, phases), takes what a job is from ``jobs``."""

NEVER_BELOW_THE_RUNTIME = ("torch", "workers", "mininet", "os_ken", "emulator", "experiment")
"""Top-level modules that importing the pure ``jobs`` package must not load."""

EXPERIMENT_LAYERS = {"config": (), "reporting": ("config",), "run": ("config", "reporting"),
                     "validate": ("config", "reporting", "run")}
"""Subpackage of ``experiment`` -> the subpackages it may import: the config imports none of them, the
reporting of a run only the config, running an experiment the config and the reporting, and validating
simulators against a run any of them. Any of them may import the back-end registry (``experiment``)."""

SHARED = {"PROJECT_ROOT": "common.paths", "free_tcp_port": "common.sockets"}
"""Constants and helpers every layer uses, by name -> the one module of ``common`` that defines them."""


def imports_of(path: pathlib.Path) -> set[str]:
    """Every module a file imports, wherever the import stands (inside functions too), absolute."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def package_graph() -> nx.DiGraph:
    """Top-level package -> the top-level packages it imports, each edge with the files that import."""
    g = nx.DiGraph()
    g.add_nodes_from(PACKAGES)
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            for mod in imports_of(path):
                top = mod.split(".")[0]
                if top in PACKAGES and top != pkg:
                    if not g.has_edge(pkg, top):
                        g.add_edge(pkg, top, files=set())
                    g.edges[pkg, top]["files"].add(str(path.relative_to(REPO)))
    return g


def test_the_top_level_packages_import_each_other_without_a_cycle():
    """No cycle in the import graph of the product's top-level packages, with no exception allowed."""
    g = package_graph()
    cycles = list(nx.simple_cycles(g))
    detail = [" -> ".join([*c, c[0]]) + ": " + "; ".join(
        f"{a}->{b} in {', '.join(sorted(g.edges[a, b]['files']))}" for a, b in zip(c, [*c[1:], c[0]], strict=True))
        for c in cycles]
    assert cycles == [], "\n".join(detail)


def module_graph() -> nx.DiGraph:
    """Module of the product -> the modules of the product it imports (a package's ``__init__`` by the
    package's name), wherever the import stands, each edge with nothing more: the files are its ends."""
    files = {p: ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
             for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}
    modules = set(files.values())
    g = nx.DiGraph()
    g.add_nodes_from(modules)
    for path, mod in files.items():
        for name in imports_of(path):
            if name in modules and name != mod:
                g.add_edge(mod, name)
    return g


def test_no_two_modules_import_each_other():
    """No cycle among the product's modules either (an import inside a function counts): two modules
    that need each other share a third, as the driver and the back ends share ``experiment.run.plugin``."""
    cycles = sorted(map(sorted, nx.simple_cycles(module_graph())))
    assert cycles == [], "\n".join(" <-> ".join(c) for c in cycles)


def test_the_module_graph_sees_a_planted_cycle(tmp_path, monkeypatch):
    """The module cycle check is not vacuous: two modules of one package importing each other are reported."""
    for name in PACKAGES:
        (tmp_path / name).mkdir()
    (tmp_path / "common" / "a.py").write_text("def f():\n    from common.b import g\n")
    (tmp_path / "common" / "b.py").write_text("from common import a\n")
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    assert sorted(map(sorted, nx.simple_cycles(module_graph()))) == [["common.a", "common.b"]]


def test_the_experiment_package_never_imports_the_emulator():
    """``experiment`` reaches the emulator only through the back-end registry (by name, on demand)."""
    g = package_graph()
    assert not g.has_edge("experiment", "emulator"), g.edges["experiment", "emulator"]["files"]


def test_reproductions_sit_above_the_experiment_and_reach_the_emulator_only_through_it():
    """``reproduce`` runs experiments through the experiment package (the emulator by name, on demand)
    and nothing below it imports ``reproduce``."""
    g = package_graph()
    assert g.has_edge("reproduce", "experiment")
    assert not g.has_edge("reproduce", "emulator"), g.edges["reproduce", "emulator"]["files"]
    assert list(g.predecessors("reproduce")) == []


def test_the_pure_packages_import_no_back_end_and_no_experiment():
    """The packages below the back ends (congestion controls, protocol, analysis, topology, placement,
    scheduling, simulator) import neither ``experiment`` nor ``emulator``."""
    g = package_graph()
    wrong = {(a, b): sorted(g.edges[a, b]["files"]) for a in PURE for b in ("experiment", "emulator")
             if g.has_edge(a, b)}
    assert wrong == {}


def runtime_importers() -> dict[str, list[str]]:
    """Package outside :data:`RUNTIME_USERS` that imports ``workers`` -> its files that do."""
    g = package_graph()
    return {a: sorted(g.edges[a, "workers"]["files"]) for a in g.predecessors("workers") if a not in RUNTIME_USERS}


def test_only_the_emulator_imports_the_worker_runtime():
    """The simulator, the pure packages and the experiment take what a job is from ``jobs``, never from the
    runtime that launches workers and moves bytes over sockets; only the emulator starts workers."""
    assert runtime_importers() == {}


def test_a_planted_runtime_import_in_the_simulator_is_reported(tmp_path, monkeypatch):
    """The runtime check is not vacuous: a simulator module importing ``workers.agent`` is reported."""
    for name in PACKAGES:
        (tmp_path / name).mkdir()
    (tmp_path / "sim" / "x.py").write_text("from workers.agent import HEADER\nfrom jobs.patterns import INA\n")
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    assert runtime_importers() == {"sim": ["sim/x.py"]}


def test_the_jobs_package_loads_neither_torch_nor_the_worker_runtime():
    """Importing every module of ``jobs`` in a fresh interpreter loads no torch, no module of ``workers``, no
    Mininet, os-ken, emulator or experiment."""
    modules = sorted(f"jobs.{p.stem}" for p in (REPO / "jobs").glob("*.py") if p.stem != "__init__")
    assert "jobs.models" in modules and "jobs.phase" in modules
    code = (f"import sys, {', '.join(modules)}\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {NEVER_BELOW_THE_RUNTIME!r}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_shared_constants_come_from_common():
    """The project's directory and a free loopback port are imported from their one module in ``common``,
    so a package needing them (``vm``, ``jobs``, tests) does not import the emulator for them."""
    wrong = {}
    for pkg in (*PACKAGES, "bench", "tests"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            for mod in imports_of(path):
                module, _, name = mod.rpartition(".")
                if name in SHARED and module != SHARED[name]:
                    wrong.setdefault(str(path.relative_to(REPO)), []).append(mod)
    assert wrong == {}


def test_the_emulator_takes_no_measurement_primitive_from_the_report():
    """What the emulator measures is computed by ``measure`` (iteration times among it): of the experiment's
    report the emulator imports only its own summariser, ``summarise_policy``."""
    used = {str(p.relative_to(REPO)): sorted(m for m in imports_of(p) if m.startswith("experiment.reporting.report."))
            for p in sorted((REPO / "emulator").rglob("*.py"))}
    assert {f: names for f, names in used.items() if names} == {
        "emulator/policy_run.py": ["experiment.reporting.report.summarise_policy"]}


def test_only_the_emulator_imports_mininet():
    """Mininet is the emulator's alone: no other package of the product imports it."""
    offenders = [str(p.relative_to(REPO)) for pkg in PACKAGES if pkg != "emulator"
                 for p in sorted((REPO / pkg).rglob("*.py"))
                 if any(m.split(".")[0] == "mininet" for m in imports_of(p))]
    assert offenders == []


def test_the_graph_sees_a_planted_cycle(tmp_path, monkeypatch):
    """The cycle check is not vacuous: two packages importing each other are reported."""
    for name, other in (("common", "backend"), ("backend", "common")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"from {other} import x\n")
    for name in PACKAGES:
        (tmp_path / name).mkdir(exist_ok=True)
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    assert sorted(map(sorted, nx.simple_cycles(package_graph()))) == [["backend", "common"]]


def test_help_and_list_read_every_back_end_class_without_its_heavy_imports():
    """``--help`` and ``run_testbed.py list`` read each registered back end's class (its help line);
    the emulator's class imports without Mininet, os-ken or the emulated network, whose imports sit in
    its methods."""
    import subprocess
    import sys

    code = ("import contextlib, io, sys\nimport run_testbed\n"
            "for argv in (['--help'], ['run', '--help'], ['list', 'back']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "        run_testbed.main(argv)\n"
            "from experiment import backend_classes\nassert backend_classes()['emu'].measured\n"
            "heavy = ('emulator.net', 'emulator.backend', 'emulator.policy_run', 'emulator.controller_proc')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mininet', 'os_ken', 'torch') or m in heavy))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_installed_distribution_holds_every_package():
    """``setup.py`` installs every top-level package of :data:`PACKAGES` and no other (an installed copy runs
    ``reproduce`` as a checkout does)."""
    import re

    listed = re.search(r"find_packages\(include=\[(.*?)\]\)", (REPO / "setup.py").read_text(), re.S).group(1)
    assert sorted(re.findall(r'"(\w+)\*"', listed)) == sorted(PACKAGES)


def experiment_graph() -> nx.DiGraph:
    """Subpackage of ``experiment`` -> the subpackages it imports, each edge with the files that import."""
    g = nx.DiGraph()
    g.add_nodes_from(EXPERIMENT_LAYERS)
    for sub in EXPERIMENT_LAYERS:
        for path in sorted((REPO / "experiment" / sub).rglob("*.py")):
            for mod in imports_of(path):
                parts = mod.split(".")
                if parts[0] == "experiment" and len(parts) > 1 and parts[1] in EXPERIMENT_LAYERS and parts[1] != sub:
                    if not g.has_edge(sub, parts[1]):
                        g.add_edge(sub, parts[1], files=set())
                    g.edges[sub, parts[1]]["files"].add(str(path.relative_to(REPO)))
    return g


def test_every_module_of_the_experiment_sits_in_a_subpackage():
    """``experiment`` is its back-end registry (``__init__.py``) and the subpackages of
    :data:`EXPERIMENT_LAYERS`, each a package: no flat module beside them, no subpackage unlisted."""
    top = REPO / "experiment"
    assert sorted(p.name for p in top.glob("*.py")) == ["__init__.py"]
    subs = sorted(p.name for p in top.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert subs == sorted(EXPERIMENT_LAYERS)
    assert all((top / s / "__init__.py").is_file() for s in subs)


def test_the_experiment_subpackages_import_only_those_below_them():
    """Each subpackage of ``experiment`` imports only the subpackages :data:`EXPERIMENT_LAYERS` allows it,
    so the config never imports a run or its reporting, and the reporting never imports the running."""
    g = experiment_graph()
    wrong = {(a, b): sorted(g.edges[a, b]["files"]) for a, b in g.edges if b not in EXPERIMENT_LAYERS[a]}
    assert wrong == {}


def test_the_experiment_subpackages_import_each_other_without_a_cycle():
    """No cycle among the subpackages of ``experiment``, and the layers allowed have none either."""
    assert list(nx.simple_cycles(experiment_graph())) == []
    allowed = nx.DiGraph([(a, b) for a, below in EXPERIMENT_LAYERS.items() for b in below])
    assert list(nx.simple_cycles(allowed)) == []


def test_the_back_end_registry_imports_no_subpackage_of_the_experiment():
    """``experiment/__init__.py`` names its back ends by ``module:class`` and imports none of its
    subpackages, so any subpackage may read the registry without a cycle."""
    mods = imports_of(REPO / "experiment" / "__init__.py")
    assert sorted(m for m in mods if m.split(".")[0] == "experiment") == []


def test_a_planted_back_edge_between_experiment_subpackages_is_reported(tmp_path, monkeypatch):
    """The layer check is not vacuous: the config importing the reporting is reported."""
    for sub in EXPERIMENT_LAYERS:
        (tmp_path / "experiment" / sub).mkdir(parents=True)
    (tmp_path / "experiment" / "config" / "x.py").write_text("from experiment.reporting.summary import PolicyRun\n")
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    g = experiment_graph()
    assert list(g.edges) == [("config", "reporting")]
    assert g.edges["config", "reporting"]["files"] == {"experiment/config/x.py"}
