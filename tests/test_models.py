"""Model profiles: published parameter counts, DDP bucketing, the real small CNN, registry errors,
and the purity of the jobs package's pure modules."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest
from conftest import REPO

from common.errors import JobError
from common.units import scale_bytes
from jobs.models import (
    DDP_BUCKET_CAP_BYTES,
    DDP_FIRST_BUCKET_BYTES,
    MIB,
    MODELS,
    TRAINABLE_MODELS,
    ddp_buckets,
    get_model,
    scaled_buckets,
)

TIRESIAS_TENSORS = REPO / "data" / "tiresias" / "model_large_tensors_mb.json"

PUBLISHED_PARAMS = {  # torchvision / Hugging Face parameter counts
    "resnet50": 25_557_032,
    "resnet101": 44_549_160,
    "vgg16": 138_357_544,
    "vgg19": 143_667_240,
    "bert_base": 109_482_240,
    "resnet152": 60_192_808,
    "vgg11": 132_863_336,
    "alexnet": 61_100_840,
    "wide_resnet101": 126_886_696,
    "roberta_base": 124_645_632,
}


def test_required_models_registered():
    """The registry holds at least the models the experiments name."""
    assert {"resnet50", "vgg16", "bert_base", "small_cnn"} <= set(MODELS)
    assert all(name == p.name for name, p in MODELS.items())


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_param_bytes_equal_published_counts(name):
    """fp32 parameter bytes are 4 x the published parameter count."""
    assert MODELS[name].param_bytes == 4 * PUBLISHED_PARAMS[name]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_buckets_follow_ddp_rule(name):
    """Buckets sum to param_bytes, are the reversed tensors cut at 1 MiB then 25 MiB, and none is cut late."""
    prof = MODELS[name]
    assert sum(prof.bucket_bytes) == prof.param_bytes == sum(prof.tensor_bytes)
    tensors = list(reversed(prof.tensor_bytes))
    i = 0
    for k, bucket in enumerate(prof.bucket_bytes):
        limit = DDP_FIRST_BUCKET_BYTES if k == 0 else DDP_BUCKET_CAP_BYTES
        members = []
        while sum(members) < bucket:
            members.append(tensors[i])
            i += 1
        assert sum(members) == bucket
        assert bucket - members[-1] < limit  # closed as soon as it reached the limit, not later
        if k < len(prof.bucket_bytes) - 1:
            assert bucket >= limit  # only the last bucket may stay below its limit
    assert i == len(tensors)
    assert prof.compute_time_s > 0 and prof.batch_size > 0 and "ESTIMATE" in prof.source


def test_ddp_buckets_worked_example():
    """Tensors (3, 10, 20, 0.5, 0.6) MiB in forward order give buckets (1.1, 30, 3) MiB."""
    t = [3 * MIB, 10 * MIB, 20 * MIB, MIB // 2, 6 * MIB // 10]
    assert ddp_buckets(t) == (MIB // 2 + 6 * MIB // 10, 30 * MIB, 3 * MIB)
    assert ddp_buckets([100]) == (100,)


@pytest.mark.parametrize("name", ["resnet50", "resnet101", "vgg16", "vgg19"])
def test_large_tensors_match_tiresias_list(name):
    """Tensors above 1.05 MiB, rounded to 0.1 MiB, are the same multiset as Tiresias' large-tensor list."""
    listed = json.loads(TIRESIAS_TENSORS.read_text())["models"][name]
    ours = [int(b / MIB * 10 + 0.5) / 10 for b in MODELS[name].tensor_bytes if b > 1.05 * MIB]  # half up
    assert Counter(ours) == Counter(listed)


def test_vgg16_memory_matches_cassini_table():
    """VGG16's fp32 parameters are 527.8 MiB, Cassini Table 4.2's 528 MB; ResNet50's 97.5 MiB (98 MB)."""
    assert round(MODELS["vgg16"].param_bytes / MIB, 1) == 527.8
    assert round(MODELS["resnet50"].param_bytes / MIB) == 97


def test_small_cnn_matches_real_torch_model():
    """small_cnn's tensors (order and sizes) and param_bytes equal the real torch module's parameters."""
    import torch  # noqa: F401 (the worker-side module needs it)

    from workers.nets import TRAINABLE, SmallCNN

    params = list(SmallCNN().parameters())
    prof = MODELS["small_cnn"]
    assert tuple(p.numel() * p.element_size() for p in params) == prof.tensor_bytes
    assert sum(p.numel() * p.element_size() for p in params) == prof.param_bytes
    assert len(prof.bucket_bytes) == 2  # one >= 1 MiB bucket, then the rest: exercises multi-bucket hooks
    assert set(TRAINABLE) == set(TRAINABLE_MODELS)


def test_scaled_buckets_divide_by_scale():
    """scaled_buckets applies scale_bytes to each bucket, keeping whole float32 elements."""
    prof = MODELS["vgg16"]
    scaled = scaled_buckets(prof, 100.0)
    assert scaled == tuple(scale_bytes(b, 100.0) for b in prof.bucket_bytes)
    assert all(b % 4 == 0 and b >= 4 for b in scaled)
    assert abs(sum(scaled) - prof.param_bytes / 100.0) <= 4 * len(scaled)
    with pytest.raises(JobError, match="scale must be > 0"):
        scaled_buckets(prof, 0)


def test_unknown_model_lists_names():
    """get_model on an unknown name raises JobError listing the registered models."""
    assert get_model("vgg16") is MODELS["vgg16"]
    with pytest.raises(JobError, match=r"unknown model 'vgg_16'; valid: .*resnet50.*vgg16.*mean 'vgg16'"):
        get_model("vgg_16")


def test_pure_modules_load_no_torch():
    """Importing jobs.models, .patterns, .records and workers.launcher loads no torch, mininet or os_ken."""
    code = ("import sys, jobs.models, jobs.patterns, jobs.records, workers.launcher; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'mininet', 'os_ken')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_jobs_compute_time_replaces_only_its_models_compute_time():
    """``job_model``: 0 is the model's profile itself; a positive ``compute_ms`` sets its compute time
    (seconds in the profile) and says so in its source; buckets and bytes stay the model's."""
    from jobs.models import job_model

    vgg = get_model("vgg16")
    assert job_model("vgg16") is vgg and job_model("vgg16", 0.0) is vgg
    set_ = job_model("vgg16", 95.0)
    assert set_.compute_time_s == pytest.approx(0.095) and "set by the job: 95 ms" in set_.source
    assert (set_.bucket_bytes, set_.param_bytes, set_.batch_size) == (vgg.bucket_bytes, vgg.param_bytes, vgg.batch_size)
    with pytest.raises(JobError, match="unknown model"):
        job_model("vgg17", 95.0)
