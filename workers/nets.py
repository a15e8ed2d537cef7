"""Torch models that the worker's ``train`` mode really trains (worker side: imports torch).

Each is registered in :data:`TRAINABLE` under the name of its :mod:`jobs.models` profile,
and its shape constants come from there, so the profile's ``param_bytes`` and buckets
describe exactly this module (``tests/test_models.py`` checks it).
"""

from __future__ import annotations

import torch
from torch import nn

from jobs import models as m


class SmallCNN(nn.Module):
    """Two 3x3 conv + ReLU + 2x2 max-pool stages, then a hidden linear layer and a classifier.

    Input: ``(batch, 3, 32, 32)`` float32 images; output: ``(batch, 10)`` logits.
    """

    def __init__(self):
        super().__init__()
        layers: list[nn.Module] = []
        c_in = m.SMALL_CNN_IN_CHANNELS
        for c in m.SMALL_CNN_CHANNELS:
            layers += [nn.Conv2d(c_in, c, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
            c_in = c
        side = m.SMALL_CNN_IMAGE_PX // 2 ** len(m.SMALL_CNN_CHANNELS)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(c_in * side * side, m.SMALL_CNN_HIDDEN),
            nn.ReLU(),
            nn.Linear(m.SMALL_CNN_HIDDEN, m.SMALL_CNN_CLASSES),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits for a batch of images."""
        return self.classifier(self.features(x))


def synthetic_batch(batch_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed random batch of ``SmallCNN`` inputs and class labels (deterministic in ``seed``)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, m.SMALL_CNN_IN_CHANNELS, m.SMALL_CNN_IMAGE_PX, m.SMALL_CNN_IMAGE_PX,
                    generator=g)
    y = torch.randint(0, m.SMALL_CNN_CLASSES, (batch_size,), generator=g)
    return x, y


TRAINABLE = {
    "small_cnn": SmallCNN,
}
