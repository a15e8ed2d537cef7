"""Contract of the simulator's engines (:data:`sim.engines.SIM_ENGINES`): every entry is a mode the config
accepts, builds its back end, and does what its capability flags say, each flag checked against the
back end's behaviour."""

from __future__ import annotations

import dataclasses

import pytest

from backend.protocol import Backend, ExperimentJob
from common.errors import ConfigError, JobError
from placement.base import GpuSlot, Placement, TimeShift
from sim.engines import SIM_ENGINES, engines_where, sim_engine
from sim.flowsim import SimOptions
from sim.mltcp import MltcpFlows, MltcpParams
from topo import build_topology

ENGINES = sorted(SIM_ENGINES)


def fabric():
    """Three 1-GPU machines under one leaf: h1-h2 and h1-h3 share h1's link."""
    return build_topology("leaf_spine", n_leaf=1, n_spine=1, hosts_per_leaf=3, gpus_per_machine=1)


def back_end(name: str, options: SimOptions = SimOptions(), **kwargs) -> Backend:
    """Engine ``name``'s back end on :func:`fabric` at 100 Mbit/s per link, scale 1, no warm-up."""
    g = fabric()
    return sim_engine(name).backend_class()(g, {(u, v): 100.0 for u, v in g.edges()}, 1.0, 0, options, **kwargs)


def job(name: str, machines: tuple[str, ...], collective: str = "ring", model: str = "resnet50",
        iterations: int = 3) -> tuple[ExperimentJob, Placement]:
    return (ExperimentJob(name, len(machines), model=model, collective=collective, iterations=iterations),
            Placement(name, tuple(GpuSlot(m, 0) for m in machines), ps_host="h3" if collective == "ina" else None))


def run_to_end(backend: Backend) -> None:
    while backend.advance(float("inf")):
        pass


def two_contended_runs(name: str, options: SimOptions) -> tuple[float, float]:
    """The communication times of two small rings over h1's link, the second starting a little later."""
    backend = back_end(name, options, start_delays_s={"b": 0.05})
    backend.start([job("a", ("h1", "h2"), model="small_cnn"), job("b", ("h1", "h3"), model="small_cnn")])
    run_to_end(backend)
    return backend.estimate("a").comm_mean_s, backend.estimate("b").comm_mean_s


def test_the_registry_has_the_step_level_and_the_fluid_engine():
    """The config's ``simulator.mode`` values are the registry's names, each entry keyed by its own name."""
    from experiment.config.schema import SIM_MODES

    assert SIM_MODES == tuple(SIM_ENGINES) == ("steps", "fluid")
    assert all(engine.name == name for name, engine in SIM_ENGINES.items())
    with pytest.raises(ConfigError, match="valid: fluid, steps"):
        sim_engine("step")


@pytest.mark.parametrize("name", ENGINES)
def test_every_engine_builds_its_back_end_from_a_config(name):
    """The run's back end (experiment.run.simrun.sim_backend) is the class the engine names, a protocol back end."""
    from experiment.config.schema import ExperimentConfig, JobConfig, TopologyConfig, validate
    from experiment.run.simrun import sim_backend

    cfg = ExperimentConfig(name="engines", topology=TopologyConfig("fat_tree", {"k": 4}),
                           jobs=(JobConfig("a", "resnet50", 2, "ring"),), policies=("consolidate",))
    cfg = dataclasses.replace(cfg, simulator=dataclasses.replace(cfg.simulator, mode=name))
    cls = sim_engine(name).backend_class()
    assert issubclass(cls, Backend)
    assert type(sim_backend(cfg, validate(cfg, backend="sim"))) is cls


@pytest.mark.parametrize("name", ENGINES)
def test_models_ina_says_whether_an_ina_job_runs(name):
    """An engine that models INA runs an INA job to its iterations; any other refuses it at its start."""
    backend = back_end(name, ina_switches=("l1",))
    start = job("i", ("h1", "h2"), "ina")
    if sim_engine(name).models_ina:
        backend.start([start])
        run_to_end(backend)
        assert backend.estimate("i").iterations == 3
    else:
        with pytest.raises(JobError, match="in-network aggregation"):
            backend.start([start])


@pytest.mark.parametrize("name", ENGINES)
def test_the_config_accepts_an_ina_job_only_on_an_engine_that_models_it(name):
    """The simulator's config check names the engines that model INA when the chosen one does not."""
    from experiment.config.schema import from_dict, validate

    cfg = from_dict({
        "name": "ina", "topology": {"kind": "leaf_spine", "n_leaf": 2, "n_spine": 1, "hosts_per_leaf": 3,
                                    "gpus_per_machine": 1},
        "jobs": [{"name": "a", "model": "vgg16", "workers": 4, "collective": "ina"}],
        "policies": ["consolidate"], "simulator": {"mode": name}})
    if sim_engine(name).models_ina:
        validate(cfg, backend="sim")
    else:
        with pytest.raises(ConfigError, match=rf"set simulator: \{{mode: {engines_where(lambda e: e.models_ina)}\}}"):
            validate(cfg, backend="sim")


@pytest.mark.parametrize("name", ENGINES)
def test_step_level_says_whether_ranks_leave_iteration_records_and_ecn_estimates(name):
    """A step-level engine records every rank's measured iterations and estimates ECN marks when asked;
    another records none and estimates no marks."""
    backend = back_end(name, SimOptions(ecn=True))
    backend.start([job("a", ("h1", "h2")), job("b", ("h1", "h3"))])
    run_to_end(backend)
    records = getattr(backend, "records", {}).get("a", [])
    if sim_engine(name).step_level:
        assert sorted((r.iteration, r.rank) for r in records) == [(i, r) for i in range(3) for r in range(2)]
        assert backend.estimate("a").ecn_marks > 0
    else:
        assert records == [] and backend.estimate("a").ecn_marks is None


@pytest.mark.parametrize("name", ENGINES)
def test_aligns_phases_says_whether_a_time_shift_is_applied(name):
    """The back end reports a shift applied exactly when the engine aligns phases."""
    backend = back_end(name)
    backend.start([job("a", ("h1", "h2"))])
    assert backend.shift([TimeShift("a", 0.01, 0.1)]) is sim_engine(name).aligns_phases


@pytest.mark.parametrize("name", ENGINES)
def test_models_congestion_control_says_whether_mltcp_changes_the_shares(name):
    """Under MLTCP's weights two rings that share a link get other times than under max-min on an engine
    that models the congestion control, and the same ones on an engine that does not."""
    maxmin = two_contended_runs(name, SimOptions())
    mltcp = two_contended_runs(name, SimOptions(mltcp=MltcpFlows(MltcpParams(2.0, 1.0), idle_gap_s=0.001)))
    assert maxmin[0] > 0 and maxmin[1] > 0
    if sim_engine(name).models_congestion_control:
        assert mltcp != maxmin
    else:
        assert mltcp == maxmin
