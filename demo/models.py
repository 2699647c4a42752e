"""The practitioners' classifier: a small CNN for 28×28 grey images.

``make_net`` is the architecture entry point ``twinaudit oracle serve --arch
demo.models:make_net`` loads the trained state dict into, so it takes no arguments.
"""

from __future__ import annotations

from torch import nn

#: Fashion-MNIST has ten classes.
N_CLASSES = 10
#: Channels of the first convolution (the second has twice as many).
WIDTH = 16
#: Units of the hidden fully connected layer.
HIDDEN = 1024


def conv_layers(width: int) -> list[nn.Module]:
    """Return conv3×3(1→w)–ReLU–pool, conv3×3(w→2w)–ReLU–pool: 28×28 → 2w×7×7."""
    return [
        nn.Conv2d(1, width, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
    ]


class DemoCNN(nn.Module):
    """conv3×3(1→w)–ReLU–pool, conv3×3(w→2w)–ReLU–pool, fc(2w·49→hidden)–ReLU–fc(→10).

    With the defaults (w=16, hidden=1024) it has 1.62M weights, 99% of them in the
    first fully connected layer: capacity to memorise a few thousand images (which is
    what lets an audit tell a published twin from its hidden sibling), while the
    narrow convolutions keep a CPU epoch cheap.
    """

    def __init__(self, width: int = WIDTH, hidden: int = HIDDEN, n_classes: int = N_CLASSES):
        """Build the layers (PyTorch's default initialisation; seed torch before)."""
        super().__init__()
        self.features = nn.Sequential(*conv_layers(width))
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(2 * width * 7 * 7, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n_classes),
        )

    def forward(self, x):  # type: ignore[no-untyped-def]
        """Return logits (N, classes) for images (N, 1, 28, 28) in [0, 1]."""
        return self.classifier(self.features(x))


def make_net() -> DemoCNN:
    """Return an untrained :class:`DemoCNN` with the demo's sizes (the ``--arch`` entry point)."""
    return DemoCNN()
