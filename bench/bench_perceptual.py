"""How visible the default mark is on photos, with and without its zero-mean constraint.

Run with ``python -m bench perceptual`` (``python -m bench.bench_perceptual --sheet
sheet.png`` also writes the contact sheet of the large landscape). The sample photos
are scikit-image's and scikit-learn's bundled colour photos (astronaut, coffee,
chelsea, rocket, hubble_deep_field, retina; china, flower) and one large landscape
made from scikit-learn's ``china.jpg`` (a temple under a blue sky, 640×427) upscaled
to 3088×2056 with Lanczos and given a sensor-like grain of σ = 2 levels, the size of
the issue #39 landscape whose sky turned pink.

It marks them as ``owner mark photos/ --labels labels.csv`` does by default: a
``proxy-own`` CNN trained on the photos themselves (each its own label) at 32 px,
PGD with the proxy settings at the working resolution (``work_scale`` 2), and reports
for a free mark (``neutral_mark`` false, the mark before issue #39) and the default
neutral one:

- CIEDE2000 ΔE (mean, max), SSIM (mean, min) and the colour cast (largest mean change
  of a channel, levels) of both versions against the originals
  (:mod:`twinaudit.owner.images.perceptual`), over all photos and on the landscape alone;
- the mean feature distance ‖h(x⁰) − h(x¹)‖₂ of the twins in the marking proxy (what
  PGD maximises; the detection an audit sees grows with it) and in EfficientNet-Lite0.

``--steps`` shortens the proxy's training (default: the 3,160 steps ``owner mark``
trains).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
from PIL import Image

from twinaudit.cli.threads import default_threads, use_threads
from twinaudit.owner.images.perceptual import PerceptualCheck, PerceptualMeasure
from twinaudit.owner.images.sheet import write_fitted_contact_sheet
from twinaudit.owner.marking import MarkingConfig, feature_distances, load_extractor, make_marker
from twinaudit.owner.marking.config import OWN_PROXY, pgd_defaults
from twinaudit.owner.marking.extractors import proxy_extractor
from twinaudit.owner.marking.markers import PgdMarker
from twinaudit.owner.marking.proxy import OWN_STEPS, square_images, train_own_proxy

Pixels = npt.NDArray[np.uint8]

SEED: Final = bytes(range(32))
#: The landscape's size: the issue #39 photo's.
LANDSCAPE: Final = (2056, 3088)
SKIMAGE_PHOTOS: Final = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "retina")


def sample_photos() -> list[tuple[str, Pixels]]:
    """Return the sample photos (name, RGB uint8), the large landscape last."""
    import skimage.data  # noqa: PLC0415 - the ml extra
    from sklearn.datasets import load_sample_images  # noqa: PLC0415 - dev only

    photos = [(name, np.asarray(getattr(skimage.data, name)())) for name in SKIMAGE_PHOTOS]
    bunch = load_sample_images()
    named = dict(zip((Path(f).stem for f in bunch.filenames), bunch.images, strict=True))
    photos += [(name, np.asarray(named[name])) for name in ("china", "flower")]
    height, width = LANDSCAPE
    large = Image.fromarray(named["china"]).resize((width, height), Image.Resampling.LANCZOS)
    grain = np.random.default_rng(0).normal(0.0, 2.0, size=(height, width, 3))
    landscape = np.clip(np.asarray(large, dtype=np.float64) + grain, 0, 255).round()
    photos.append(("china-3088x2056", landscape.astype(np.uint8)))
    return photos


def proxy_config() -> MarkingConfig:
    """Return ``owner mark``'s default configuration with labels, for mixed-size photos."""
    pgd = pgd_defaults(OWN_PROXY, 10)
    return MarkingConfig(
        extractor=OWN_PROXY,
        input_size=32,
        steps=int(pgd["steps"]),
        step_size=float(pgd["step_size"]),
        batch_size=int(pgd["batch_size"]),
    )


def measure(
    photos: list[tuple[str, Pixels]], marker: PgdMarker
) -> tuple[list[tuple[Pixels, Pixels]], PerceptualMeasure, PerceptualMeasure, float]:
    """Mark every photo; return the twins, the measures (all, landscape) and the distance."""
    every, last = PerceptualCheck(), PerceptualCheck()
    twins, distances = [], []
    for index, (_, pixels) in enumerate(photos):
        version0, version1 = marker.mark(pixels[None], index)
        twins.append((version0[0], version1[0]))
        distances.append(float(feature_distances(marker.extractor, version0, version1)[0]))
        for version in (version0[0], version1[0]):
            every.add(pixels, version)
            if index == len(photos) - 1:
                last.add(pixels, version)
    all_measure, landscape_measure = every.result(), last.result()
    assert all_measure is not None
    assert landscape_measure is not None
    return twins, all_measure, landscape_measure, float(np.mean(distances))


def _line(label: str, m: PerceptualMeasure) -> str:
    return (
        f"    {label:<10} dE2000 mean {m.delta_e_mean:5.2f} max {m.delta_e_max:5.1f}; SSIM mean "
        f"{m.ssim_mean:.4f} min {m.ssim_min:.4f}; cast {m.cast:5.2f} levels"
    )


def main(argv: list[str] | None = None) -> None:
    """Print the perceptual figures of the default mark before and after (module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_perceptual", description=__doc__)
    parser.add_argument("--steps", type=int, default=OWN_STEPS, help="proxy training steps")
    parser.add_argument("--sheet", type=Path, help="write the landscape's contact sheet here")
    args = parser.parse_args([] if argv is None else argv)
    use_threads(default_threads())
    photos = sample_photos()
    config = proxy_config()
    squares = square_images(np.stack([square_images(p[None], 32)[0] for _, p in photos]), 32)
    print(
        f"{len(photos)} photos ({', '.join(f'{n} {p.shape[1]}x{p.shape[0]}' for n, p in photos)});"
        f" proxy-own at 32 px trained {args.steps} steps, PGD {config.steps} steps of"
        f" {config.step_size:g}, epsilon {config.epsilon}, work_scale {config.work_scale}",
        flush=True,
    )
    model = train_own_proxy(
        squares, np.arange(len(photos)), seed=0, steps=args.steps, converge=False
    )
    imagenet = load_extractor("efficientnet-lite0", input_size=96)
    results = {}
    for neutral in (False, True):
        marker = make_marker(
            replace(config, neutral_mark=neutral),
            SEED,
            device="cpu",
            extractor=proxy_extractor(model, 32),
        )
        assert isinstance(marker, PgdMarker)
        twins, every, landscape, distance = measure(photos, marker)
        imagenet_distance = float(
            np.mean([feature_distances(imagenet, a[None], b[None])[0] for a, b in twins])
        )
        results[neutral] = twins
        print(
            f"  neutral_mark {neutral}: feature distance {distance:.3f} in the proxy,"
            f" {imagenet_distance:.3f} in efficientnet-lite0 (mean over the photos)"
        )
        print(_line("all", every))
        print(_line("landscape", landscape), flush=True)
    if args.sheet is not None:
        raw = photos[-1][1]
        rows = [("raw", [raw])]
        for neutral, twins in results.items():
            version0, version1 = twins[-1]
            gain = 127.0 / (2 * config.epsilon)
            difference = np.clip(
                128.0 + gain * (version0.astype(np.float64) - version1.astype(np.float64)),
                0,
                255,
            ).astype(np.uint8)
            name = "neutral" if neutral else "free"
            rows += [(f"{name} x0", [version0]), (f"x0-x1 x{gain:.1f}", [difference])]
        write_fitted_contact_sheet(args.sheet, rows)
        print(f"contact sheet of the landscape: {args.sheet}")


if __name__ == "__main__":
    main(sys.argv[1:])
