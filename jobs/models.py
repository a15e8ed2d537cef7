"""Model profiles: what one data-parallel iteration of a model computes and communicates.

A :class:`ModelProfile` holds a model's fp32 parameter bytes, the gradient buckets PyTorch
DistributedDataParallel (DDP) allreduces each iteration (:func:`ddp_buckets`, DDP's defaults), and
the forward+backward compute time of one iteration on one V100-class GPU. Parameter tensors are
exact (built from the published architectures, checked against their parameter counts and
Cassini's Table 4.2, ``docs/resolutions.md`` Cassini §7.3), buckets follow DDP's default
settings, compute times are estimates (+/-30%). All sizes are bytes; :func:`scaled_buckets`
applies the time-preserving scale factor.

Where each number comes from, and how exact it is: ``docs/fidelity.md`` (Model profiles).
"""

from __future__ import annotations

import dataclasses

from common.errors import JobError, unknown_name
from common.units import scale_bytes

FLOAT32_BYTES = 4
MIB = 1024 * 1024
DDP_FIRST_BUCKET_BYTES = 1 * MIB
"""DDP's cap of the first bucket (``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``)."""
DDP_BUCKET_CAP_BYTES = 25 * MIB
"""DDP's default ``bucket_cap_mb`` (25 MiB)."""

# The small CNN that ``train`` mode really trains (``workers.nets.SmallCNN`` is built from these).
SMALL_CNN_IMAGE_PX = 32
SMALL_CNN_IN_CHANNELS = 3
SMALL_CNN_CHANNELS = (16, 32)
SMALL_CNN_HIDDEN = 256
SMALL_CNN_CLASSES = 10
SMALL_CNN_BATCH = 16

TRAINABLE_MODELS = frozenset({"small_cnn"})
"""Profiles that ``train`` mode can really train (each has a torch module in ``workers.nets.TRAINABLE``)."""


@dataclasses.dataclass(frozen=True)
class ModelProfile:
    """One model's per-iteration work in data-parallel training.

    Attributes:
        name: registry key.
        param_bytes: fp32 parameter bytes (= gradient bytes allreduced per iteration).
        bucket_bytes: gradient bucket sizes in bytes, in the order DDP allreduces them;
            they sum to ``param_bytes``.
        compute_time_s: forward+backward time of one iteration at paper scale on one
            V100-class GPU at ``batch_size`` (an estimate; see ``docs/fidelity.md``).
        batch_size: per-GPU batch size that ``compute_time_s`` refers to.
        source: where each number comes from, and which are estimates.
        tensor_bytes: parameter tensor sizes in bytes, in registration (forward) order.
    """

    name: str
    param_bytes: int
    bucket_bytes: tuple[int, ...]
    compute_time_s: float
    batch_size: int
    source: str
    tensor_bytes: tuple[int, ...] = ()

    def __post_init__(self):
        if sum(self.bucket_bytes) != self.param_bytes:
            raise JobError(f"model {self.name!r}: buckets sum to {sum(self.bucket_bytes)} bytes, "
                           f"param_bytes is {self.param_bytes}")
        if self.tensor_bytes and sum(self.tensor_bytes) != self.param_bytes:
            raise JobError(f"model {self.name!r}: tensors sum to {sum(self.tensor_bytes)} bytes, "
                           f"param_bytes is {self.param_bytes}")
        if any(b <= 0 for b in self.bucket_bytes):
            raise JobError(f"model {self.name!r}: bucket sizes must be positive, got {self.bucket_bytes}")
        if self.compute_time_s < 0:
            raise JobError(f"model {self.name!r}: compute_time_s must be >= 0, got {self.compute_time_s}")


def ddp_buckets(tensor_bytes, first_bucket_bytes: int = DDP_FIRST_BUCKET_BYTES,
                bucket_cap_bytes: int = DDP_BUCKET_CAP_BYTES) -> tuple[int, ...]:
    """Gradient buckets DDP allreduces in steady state, in allreduce order.

    Mirrors ``compute_bucket_assignment_by_size`` in PyTorch's ``reducer.cpp`` as used by
    the bucket rebuild after the first iteration: tensors are taken in backward-ready order
    (the reverse of registration order), added to the open bucket, and the bucket is closed
    as soon as its size reaches the current limit (``first_bucket_bytes`` for the first
    bucket, ``bucket_cap_bytes`` afterwards). A tensor is never split, so a bucket may exceed
    its limit (VGG-16's 392 MiB ``fc6`` weight is a bucket of its own). O(number of tensors).

    Args:
        tensor_bytes: parameter tensor sizes in bytes, in registration (forward) order.
        first_bucket_bytes: limit of the first bucket.
        bucket_cap_bytes: limit of every later bucket.

    Returns:
        Bucket sizes in bytes, in the order DDP allreduces them.
    """
    buckets: list[int] = []
    limit, size = first_bucket_bytes, 0
    for b in reversed(tuple(tensor_bytes)):
        size += b
        if size >= limit:
            buckets.append(size)
            limit, size = bucket_cap_bytes, 0
    if size:
        buckets.append(size)
    return tuple(buckets)


def scaled_buckets(profile: ModelProfile, scale: float) -> tuple[int, ...]:
    """Bucket sizes for the emulator under the time-preserving scale factor.

    Each bucket is divided by ``scale`` (the factor that divides link rates too) and rounded
    to whole float32 elements, at least one (see :func:`common.units.scale_bytes`).
    """
    if scale <= 0:
        raise JobError(f"scale must be > 0, got {scale}")
    return tuple(scale_bytes(b, scale) for b in profile.bucket_bytes)


# --- parameter tensors of the published architectures (element counts, registration order) ---


def _vgg_tensors(conv_channels: tuple, classes: int = 1000) -> list[int]:
    """torchvision ``vgg*`` (no batch norm): 3x3 convs with bias, then 3 linear layers."""
    out, c_in = [], 3
    for c in conv_channels:
        if c == "M":
            continue
        out += [c * c_in * 9, c]
        c_in = c
    for n_in, n_out in ((512 * 7 * 7, 4096), (4096, 4096), (4096, classes)):
        out += [n_out * n_in, n_out]
    return out


def _resnet_tensors(blocks: tuple[int, int, int, int], classes: int = 1000, width_factor: int = 1) -> list[int]:
    """torchvision ``resnet50/101/152`` (Bottleneck, expansion 4; convs without bias), and with
    ``width_factor`` 2 its ``wide_resnet50_2/101_2`` (the 3x3 convs twice as wide)."""
    out = [64 * 3 * 7 * 7, 64, 64]  # conv1, bn1 weight and bias
    inplanes = 64
    for planes, n_blocks in zip((64, 128, 256, 512), blocks, strict=True):
        width, expanded = planes * width_factor, planes * 4
        for i in range(n_blocks):
            out += [width * inplanes, width, width]          # conv1 1x1, bn1
            out += [width * width * 9, width, width]         # conv2 3x3, bn2
            out += [expanded * width, expanded, expanded]    # conv3 1x1, bn3
            if i == 0:
                out += [expanded * inplanes, expanded, expanded]  # downsample conv 1x1, bn
            inplanes = expanded
    out += [classes * 2048, classes]
    return out


def _alexnet_tensors(classes: int = 1000) -> list[int]:
    """torchvision ``alexnet``: 5 convs with bias, then 3 linear layers (61.1M parameters)."""
    out = []
    for c_out, c_in, k in ((64, 3, 11), (192, 64, 5), (384, 192, 3), (256, 384, 3), (256, 256, 3)):
        out += [c_out * c_in * k * k, c_out]
    for n_in, n_out in ((256 * 6 * 6, 4096), (4096, 4096), (4096, classes)):
        out += [n_out * n_in, n_out]
    return out


def _bert_tensors(layers: int = 12, hidden: int = 768, intermediate: int = 3072,
                  vocab: int = 30522, max_positions: int = 512, token_types: int = 2) -> list[int]:
    """Hugging Face ``BertModel`` (embeddings, encoder, pooler; no pre-training heads)."""
    out = [vocab * hidden, max_positions * hidden, token_types * hidden, hidden, hidden]
    for _ in range(layers):
        for _ in range(4):                                   # query, key, value, attention output
            out += [hidden * hidden, hidden]
        out += [hidden, hidden]                              # attention LayerNorm
        out += [intermediate * hidden, intermediate]         # intermediate dense
        out += [hidden * intermediate, hidden]               # output dense
        out += [hidden, hidden]                              # output LayerNorm
    out += [hidden * hidden, hidden]                         # pooler
    return out


_GOOGLENET_INCEPTIONS = (  # (1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj) per inception module
    (64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64),
    (192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64), (128, 128, 256, 24, 64, 64),
    (112, 144, 288, 32, 64, 64), (256, 160, 320, 32, 128, 128),
    (256, 160, 320, 32, 128, 128), (384, 192, 384, 48, 128, 128),
)


def _googlenet_tensors(classes: int = 1000) -> list[int]:
    """TF-benchmarks ``googlenet`` (Inception v1, convs with bias, no batch norm, no auxiliary heads).

    As ``scripts/tf_cnn_benchmarks/models/googlenet_model.py`` of tensorflow/benchmarks builds
    it: conv 7x7/64, conv 1x1/64, conv 3x3/192, nine inception modules (branches in order
    1x1; 1x1 then 3x3; 1x1 then 5x5; pool then 1x1), then the classifier on 1024 features.
    """
    out, c_in = [7 * 7 * 3 * 64, 64, 64 * 64, 64, 3 * 3 * 64 * 192, 192], 192
    for k1, r3, k3, r5, k5, pool in _GOOGLENET_INCEPTIONS:
        out += [c_in * k1, k1, c_in * r3, r3, 9 * r3 * k3, k3, c_in * r5, r5, 25 * r5 * k5, k5,
                c_in * pool, pool]
        c_in = k1 + k3 + k5 + pool
    out += [classes * c_in, classes]
    return out


def _small_cnn_tensors() -> list[int]:
    """``workers.nets.SmallCNN``: two 3x3 conv+pool stages and two linear layers."""
    out, c_in = [], SMALL_CNN_IN_CHANNELS
    for c in SMALL_CNN_CHANNELS:
        out += [c * c_in * 9, c]
        c_in = c
    side = SMALL_CNN_IMAGE_PX // 2 ** len(SMALL_CNN_CHANNELS)
    flat = c_in * side * side
    out += [SMALL_CNN_HIDDEN * flat, SMALL_CNN_HIDDEN]
    out += [SMALL_CNN_CLASSES * SMALL_CNN_HIDDEN, SMALL_CNN_CLASSES]
    return out


def _profile(name: str, tensor_elems: list[int], compute_time_s: float, batch_size: int,
             source: str) -> ModelProfile:
    tensor_bytes = tuple(n * FLOAT32_BYTES for n in tensor_elems)
    return ModelProfile(name=name, param_bytes=sum(tensor_bytes), bucket_bytes=ddp_buckets(tensor_bytes),
                        compute_time_s=compute_time_s, batch_size=batch_size, source=source,
                        tensor_bytes=tensor_bytes)


_VGG11 = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")
_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
_VGG19 = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
          512, 512, 512, 512, "M")
_EXACT = ("parameter tensors exact from the published architecture ({arch}); "
          "buckets from DDP defaults assuming reverse registration order; ")

MODELS: dict[str, ModelProfile] = {
    "resnet50": _profile(
        "resnet50", _resnet_tensors((3, 4, 6, 3)), compute_time_s=0.178, batch_size=64,
        source=_EXACT.format(arch="torchvision resnet50, 25.6M params")
        + "compute_time_s ESTIMATE: 64 img / ~360 img/s, V100 fp32"),
    "resnet101": _profile(
        "resnet101", _resnet_tensors((3, 4, 23, 3)), compute_time_s=0.339, batch_size=64,
        source=_EXACT.format(arch="torchvision resnet101, 44.5M params")
        + "compute_time_s ESTIMATE: resnet50's scaled by forward FLOPs (7.8 / 4.1 GFLOPs)"),
    "resnet152": _profile(
        "resnet152", _resnet_tensors((3, 8, 36, 3)), compute_time_s=0.504, batch_size=64,
        source=_EXACT.format(arch="torchvision resnet152, 60.2M params")
        + "compute_time_s ESTIMATE: resnet50's scaled by forward FLOPs (11.6 / 4.1 GFLOPs)"),
    "vgg11": _profile(
        "vgg11", _vgg_tensors(_VGG11), compute_time_s=0.136, batch_size=64,
        source=_EXACT.format(arch="torchvision vgg11, 132.9M params")
        + "compute_time_s ESTIMATE: vgg16's scaled by forward FLOPs (7.6 / 15.5 GFLOPs)"),
    "alexnet": _profile(
        "alexnet", _alexnet_tensors(), compute_time_s=0.031, batch_size=64,
        source=_EXACT.format(arch="torchvision alexnet, 61.1M params")
        + "compute_time_s ESTIMATE: resnet50's scaled by forward FLOPs (0.71 / 4.1 GFLOPs)"),
    "vgg16": _profile(
        "vgg16", _vgg_tensors(_VGG16), compute_time_s=0.278, batch_size=64,
        source=_EXACT.format(arch="torchvision vgg16, 138.4M params")
        + "compute_time_s ESTIMATE: 64 img / ~230 img/s, V100 fp32"),
    "vgg19": _profile(
        "vgg19", _vgg_tensors(_VGG19), compute_time_s=0.352, batch_size=64,
        source=_EXACT.format(arch="torchvision vgg19, 143.7M params")
        + "compute_time_s ESTIMATE: vgg16's scaled by forward FLOPs (19.6 / 15.5 GFLOPs)"),
    "googlenet": _profile(
        "googlenet", _googlenet_tensors(), compute_time_s=0.065, batch_size=64,
        source=_EXACT.format(arch="tensorflow/benchmarks tf_cnn_benchmarks googlenet, 7.0M params; its "
                             "size, tensor count >= 1 MiB and largest tensor match Tiresias' Table 6 "
                             "(26.7 MB, 7, 3.9 MB)")
        + "compute_time_s ESTIMATE: resnet50's scaled by forward FLOPs (1.5 / 4.1 GFLOPs)"),
    "wide_resnet101": _profile(
        "wide_resnet101", _resnet_tensors((3, 4, 23, 3), width_factor=2), compute_time_s=0.99, batch_size=64,
        source=_EXACT.format(arch="torchvision wide_resnet101_2, 126.9M params")
        + "compute_time_s ESTIMATE: resnet50's scaled by forward FLOPs (22.8 / 4.1 GFLOPs)"),
    "bert_base": _profile(
        "bert_base", _bert_tensors(), compute_time_s=0.19, batch_size=32,
        source=_EXACT.format(arch="Hugging Face BertModel bert-base-uncased, 110M params")
        + "compute_time_s ESTIMATE: 32 sequences of 128 tokens / ~170 seq/s, V100 fp32"),
    "roberta_base": _profile(
        "roberta_base", _bert_tensors(vocab=50265, max_positions=514, token_types=1), compute_time_s=0.19,
        batch_size=32, source=_EXACT.format(arch="Hugging Face RobertaModel roberta-base, 124.6M params")
        + "compute_time_s ESTIMATE: bert_base's (the same encoder; the larger vocabulary adds no compute)"),
    "small_cnn": _profile(
        "small_cnn", _small_cnn_tensors(), compute_time_s=0.005, batch_size=SMALL_CNN_BATCH,
        source="parameter tensors exact (workers.nets.SmallCNN, checked against torch); buckets exact for "
        "DDP defaults (checked against a real DDP run); compute_time_s ESTIMATE: rough CPU step time "
        "of this machine at batch 16, not a GPU time"),
}


def job_model(name: str, compute_ms: float = 0.0) -> ModelProfile:
    """The profile a job replays: model ``name``'s, with its compute time set to ``compute_ms``
    (paper-scale ms per iteration) when that is > 0 (a job's ``compute_ms``: another GPU or batch
    size than the profile's); raises :class:`JobError` for an unknown model."""
    model = get_model(name)
    if not compute_ms > 0:
        return model
    return dataclasses.replace(model, compute_time_s=compute_ms / 1e3,
                               source=f"{model.source}; compute_time_s set by the job: {compute_ms:g} ms")


def get_model(name: str) -> ModelProfile:
    """The profile registered under ``name``; raises :class:`JobError` listing valid names."""
    try:
        return MODELS[name]
    except KeyError:
        raise JobError(unknown_name("model", name, MODELS)) from None
