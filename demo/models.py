"""The practitioners' classifier: a small CNN for 28×28 grey images.

``make_net`` is the architecture entry point ``twinaudit oracle serve --arch
demo.models:make_net`` loads the trained state dict into, so it takes no arguments.
"""

from __future__ import annotations

from twinaudit.owner.marking.proxy import SmallCNN, conv_layers

__all__ = ["HIDDEN", "N_CLASSES", "WIDTH", "DemoCNN", "conv_layers", "make_net"]

#: Fashion-MNIST has ten classes.
N_CLASSES = 10
#: Channels of the first convolution (the second has twice as many).
WIDTH = 16
#: Units of the hidden fully connected layer.
HIDDEN = 1024


class DemoCNN(SmallCNN):
    """The owner's proxy network (:class:`~twinaudit.owner.marking.proxy.SmallCNN`), demo sizes.

    conv3×3(1→w)–ReLU–pool, conv3×3(w→2w)–ReLU–pool, fc(2w·49→hidden)–ReLU–fc(→10).
    With the defaults (w=16, hidden=1024) it has 1.62M weights, 99% of them in the
    first fully connected layer: capacity to memorise a few thousand images (which is
    what lets an audit tell a published twin from its hidden sibling), while the
    narrow convolutions keep a CPU epoch cheap.
    """

    def __init__(self, width: int = WIDTH, hidden: int = HIDDEN, n_classes: int = N_CLASSES):
        """Build the layers (PyTorch's default initialisation; seed torch before)."""
        super().__init__(channels=1, side=28, width=width, hidden=hidden, n_classes=n_classes)


def make_net() -> DemoCNN:
    """Return an untrained :class:`DemoCNN` with the demo's sizes (the ``--arch`` entry point)."""
    return DemoCNN()
