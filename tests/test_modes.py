"""The work modes a config may name (jobs.modes): each an object the rest of the testbed asks."""

import pytest

from common.errors import JobError
from experiment.config.schema import MODES
from jobs.models import TRAINABLE_MODELS, get_model, scaled_buckets
from jobs.modes import WORK_MODES, work_mode


def test_registry_keys_match_names_and_the_configs_choices():
    """Every entry is registered under its own name, and a config offers exactly these modes."""
    assert all(m.name == k for k, m in WORK_MODES.items())
    assert MODES == tuple(WORK_MODES) == ("replay", "train")


def test_replay_sends_the_scaled_buckets_and_train_the_real_ones():
    """Replay sends the profile's buckets at the run's scale; training sends DDP's own, unscaled."""
    vgg = get_model("vgg16")
    assert work_mode("replay").buckets(vgg, 500) == scaled_buckets(vgg, 500) != vgg.bucket_bytes
    assert work_mode("train").buckets(vgg, 500) == vgg.bucket_bytes


def test_train_runs_only_trainable_models_in_torch():
    """Training needs a trainable model and the torch runtime; replay runs any profile in the config's runtime."""
    train, replay = work_mode("train"), work_mode("replay")
    assert train.trains and train.runtime == "torch" and not replay.trains and replay.runtime is None
    for model in TRAINABLE_MODELS:
        train.check_model(model, "job a")
    replay.check_model("vgg16", "job a")
    with pytest.raises(JobError, match="job a: mode 'train' trains only small_cnn, not 'vgg16'"):
        train.check_model("vgg16", "job a")


def test_unknown_mode_names_the_valid_ones():
    """A misspelt mode fails with the valid names and the nearest one."""
    with pytest.raises(JobError, match="unknown mode 'trian'; valid: replay, train.*'train'"):
        work_mode("trian")


def test_the_configs_runtime_and_container_choices_are_the_emulators_registries():
    """A config offers the worker runtimes and container engines the emulator has, the command line's
    ``--container`` the same engines, and every mode's own runtime is one of them."""
    import run_testbed
    from emulator.variants import CONTAINER_ENGINES, WORKER_RUNTIMES
    from experiment.config import schema

    assert schema.RUNTIMES == tuple(WORKER_RUNTIMES)
    assert schema.CONTAINER_ENGINES == tuple(CONTAINER_ENGINES)
    container = next(a for a in run_testbed._parser()._subparsers._group_actions[0].choices["run"]._actions
                     if a.dest == "container")
    assert tuple(container.choices) == schema.CONTAINER_ENGINES
    assert {m.runtime for m in WORK_MODES.values()} - {None} <= set(WORKER_RUNTIMES)
