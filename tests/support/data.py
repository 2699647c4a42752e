"""The synthetic twin-marked images, now public in :mod:`demo.synthetic` (re-exported here)."""

from demo.synthetic import (
    N_CLASSES,
    SIDE,
    SyntheticPairs,
    smooth_fields,
    synthetic_images,
    synthetic_pairs,
)

__all__ = [
    "N_CLASSES",
    "SIDE",
    "SyntheticPairs",
    "smooth_fields",
    "synthetic_images",
    "synthetic_pairs",
]
