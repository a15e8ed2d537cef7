"""Every congestion control a config may name (``congestion.CONGESTION_CONTROLS``) against the invariants
the rest of the testbed relies on when it asks the entry instead of testing names: registered under its
own name and offered by the config in the registry's order, refused with ECN marking when it ignores
marks, installed by an emulator installer (an MLTCP variant by its BPF program), and shared by each
simulator engine as the entry says, with the simulator saying so where the engine does not model it."""

from __future__ import annotations

import ast
import dataclasses

import pytest
from conftest import REPO

from common.errors import ConfigError
from congestion import CONFIGURED, CONGESTION_CONTROLS, MAXMIN, MLTCP_WEIGHTS, congestion_control
from experiment.config import schema as config
from sim.engines import SIM_ENGINES

ENTRIES = list(CONGESTION_CONTROLS)
ENGINES = list(SIM_ENGINES)
CFG = {"name": "t", "topology": {"kind": "leaf_spine", "n_leaf": 2, "n_spine": 1, "hosts_per_leaf": 2},
       "scale": 500, "jobs": [{"name": "a", "model": "resnet50", "workers": 2}], "policies": ["consolidate"]}


def with_cc(name: str, **over) -> config.ExperimentConfig:
    """The small config :data:`CFG` with congestion control ``name`` (and ``over``)."""
    return config.from_dict({**CFG, "congestion_control": name, **over})


@pytest.mark.parametrize("name", ENTRIES)
def test_an_entry_is_registered_under_its_own_name(name):
    """The registry key is the entry's name, lowercase, and the lookup returns the entry itself."""
    cc = CONGESTION_CONTROLS[name]
    assert cc.name == name == name.lower()
    assert congestion_control(name) is cc


def test_the_config_offers_the_registry_in_its_order():
    """``congestion_control`` accepts exactly the registered names, listed in the registry's order."""
    assert config.CONGESTION_CONTROLS == tuple(CONGESTION_CONTROLS)


def test_an_unknown_name_is_refused_with_the_valid_ones():
    """An unknown congestion control is a ConfigError naming every registered one, with the nearest as a hint."""
    with pytest.raises(ConfigError) as e:
        congestion_control("cubc")
    assert str(e.value) == (f"unknown congestion control 'cubc'; valid: {', '.join(sorted(CONGESTION_CONTROLS))} "
                            "(did you mean 'cubic'?)")


@pytest.mark.parametrize("name", ENTRIES)
def test_one_that_ignores_ecn_is_refused_with_ecn_marking(name):
    """With ECN marking on, the emulator's config check accepts a congestion control exactly when it reacts
    to ECN, naming the fix; with marking off it accepts any."""
    cc = CONGESTION_CONTROLS[name]
    if cc.reacts_to_ecn:
        config.validate(with_cc(name))
    else:
        with pytest.raises(ConfigError, match=rf"^config.congestion_control: '{name}' ignores ECN marks; use one "
                                              r"that reacts to them \(cubic, reno, dctcp\) or set ecn.marking: off$"):
            config.validate(with_cc(name))
    config.validate(with_cc(name, ecn={"marking": "off"}))


@pytest.mark.parametrize("name", ENTRIES)
def test_mltcp_scales_a_registered_kernel_congestion_control(name):
    """An MLTCP entry's base is a registered congestion control that is not MLTCP itself; others have none."""
    cc = CONGESTION_CONTROLS[name]
    if cc.is_mltcp:
        base = congestion_control(cc.mltcp_base)
        assert not base.is_mltcp and base.reacts_to_ecn
    else:
        assert cc.mltcp_base is None


@pytest.mark.parametrize("name", ENTRIES)
def test_the_emulator_installs_every_entry(name):
    """Every entry names an installer of the emulator; an MLTCP variant is a BPF program it registers, and
    every other entry is a kernel module."""
    from emulator.mltcp import VARIANTS
    from emulator.variants import CONGESTION_INSTALLERS, KernelModule, StructOps

    cc = CONGESTION_CONTROLS[name]
    installer = CONGESTION_INSTALLERS[cc.installer]
    assert installer.name == cc.installer
    assert isinstance(installer, StructOps if cc.is_mltcp else KernelModule)
    assert (name in VARIANTS) == cc.is_mltcp


def test_the_emulator_gets_the_entry_and_mltcp_its_parameters():
    """The emulated network's options carry the config's entry (the object, not its name) and MLTCP's F
    with the idle gap dilated to wall seconds."""
    from emulator.runner import net_options

    options = net_options(with_cc("mltcp_cubic", dilation=2, mltcp={"slope": 4, "idle_gap_ms": 30}))
    assert options.congestion_control is CONGESTION_CONTROLS["mltcp_cubic"]
    assert options.mltcp == (4.0, 1.0, 0.06)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ENTRIES)
def test_each_engine_shares_links_as_the_entry_says(name, engine):
    """A kernel congestion control is the configured max-min or TCP share on every engine; an MLTCP one is
    MLTCP's weights on an engine that models congestion control, else max-min and not modelled."""
    cc, e = CONGESTION_CONTROLS[name], SIM_ENGINES[engine]
    sharing = cc.sharing(e)
    if not cc.is_mltcp:
        assert sharing.model == CONFIGURED and sharing.modelled
    elif e.models_congestion_control:
        assert sharing.model == MLTCP_WEIGHTS and sharing.modelled
    else:
        assert sharing.model == MAXMIN and not sharing.modelled


@pytest.mark.parametrize("name", ENTRIES)
def test_some_engine_models_every_entry(name):
    """Whatever the congestion control, an engine models it (the one the not-modelled message names)."""
    assert any(CONGESTION_CONTROLS[name].sharing(e).modelled for e in SIM_ENGINES.values())


@pytest.mark.parametrize("name", ENTRIES)
@pytest.mark.parametrize("sharing", ["tcp", "maxmin"])
def test_the_step_level_engine_builds_the_entry_s_sharing(name, sharing):
    """The strategy the step-level engine builds from the config's options is the entry's model: MLTCP's
    weights, or the configured TCP share or max-min."""
    from experiment.run.simrun import sim_options
    from sim.sharing import MaxMin, MltcpSharing, TcpShare, link_sharing
    from topo import build_topology

    cfg = with_cc(name, simulator={"sharing": sharing})
    options = sim_options(cfg, build_topology(cfg.topology.kind, **cfg.topology.params))
    built = link_sharing(options.mltcp, options.shared_efficiency, [1.0], lambda f: f, lambda t, f: None)
    expected = {MLTCP_WEIGHTS: MltcpSharing, CONFIGURED: TcpShare if sharing == "tcp" else MaxMin}
    assert type(built) is expected[congestion_control(name).sharing(SIM_ENGINES["steps"]).model]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ENTRIES)
def test_the_simulator_says_how_an_engine_shares_links_under_its_own_model(name, engine):
    """A run on the simulator says nothing for the configured sharing, how MLTCP's F shares links, or that
    the engine does not model the congestion control and which engine does."""
    from experiment.run.simrun import SimulatorExperiment

    cfg = with_cc(name, simulator={"mode": engine}, mltcp={"slope": 20})
    said = []
    SimulatorExperiment().prepare(cfg, None, said.append)
    sharing = CONGESTION_CONTROLS[name].sharing(SIM_ENGINES[engine])
    if sharing.model == CONFIGURED:
        assert said == []
    elif sharing.modelled:
        assert said == [f"congestion control {name}: links shared in proportion to MLTCP's F (slope 20, "
                        "intercept 1; sim.mltcp.MltcpFlows)"]
    else:
        modelling = " or ".join(n for n, e in SIM_ENGINES.items() if CONGESTION_CONTROLS[name].sharing(e).modelled)
        assert said == [f"congestion control {name}: not modelled by the {engine} engine (links are shared "
                        f"max-min; simulator mode: {modelling} models it)"]


def test_entries_are_immutable():
    """An entry is a frozen value: chosen once, nothing downstream changes it."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        CONGESTION_CONTROLS["cubic"].reacts_to_ecn = False


PRODUCT = ("common", "congestion", "backend", "measure", "topo", "placement", "scheduling", "sim", "jobs", "ina",
           "controller", "experiment", "emulator", "vm", "reproduce", "bench")


def name_tests(source: str) -> list[int]:
    """Lines of ``source`` comparing a config's congestion control (``x.congestion_control`` or
    ``congestion_control``) with anything by ``==``, ``!=``, ``in`` or ``not in``."""

    def is_cc(node):
        return (isinstance(node, ast.Attribute) and node.attr == "congestion_control") or (
            isinstance(node, ast.Name) and node.id == "congestion_control")

    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Compare)
            and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops)
            and any(is_cc(a) for a in (node.left, *node.comparators))]


def test_no_product_module_tests_a_congestion_control_s_name():
    """Every part asks the run's CongestionControl what it needs; none tests the config's name."""
    found = {str(p.relative_to(REPO)): lines for pkg in PRODUCT for p in sorted((REPO / pkg).rglob("*.py"))
             if (lines := name_tests(p.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_name_check_sees_a_planted_test():
    """The check is not vacuous: a membership test and an equality are both found."""
    assert name_tests("if cfg.congestion_control in MLTCP:\n    pass\nok = congestion_control == 'bbr'\n") == [1, 3]



def test_mltcp_without_its_parameters_is_refused_in_one_line(tmp_path):
    """An emulated network asked for an MLTCP variant without F's parameters stops before touching the
    kernel, naming what is missing."""
    from common.errors import EmulationError
    from emulator.net import EmulatedNetwork, NetOptions
    from emulator.variants import CONGESTION_INSTALLERS
    from topo import leaf_spine

    cc = CONGESTION_CONTROLS["mltcp_reno"]
    net = EmulatedNetwork(leaf_spine(2, 1, 1), str(tmp_path), NetOptions(scale=500, congestion_control=cc))
    with pytest.raises(EmulationError, match=r"^congestion control mltcp_reno needs MLTCP's parameters"):
        CONGESTION_INSTALLERS[cc.installer].install(net)
