"""q̂ over all pairs of a photo vault, through the practitioner's resize (issue #39, part 7).

A claim stops once its test decides, so its q̂ is over the pairs it opened. As the
ablation does for the 28 px tables (:mod:`evaluation.ablation`), the photo rung scores
the labelled owner's default scores on every pair of each vault against each model,
with the claims' perturbation streams and the ablation's audit seed, the model
answering behind :class:`~evaluation.photos.ResizingOracle`, or, where the claims
reach it through the arbiter's fit (:func:`~evaluation.photos.fits_at_arbiter`), each
version fitted first by the spec's rule, the copies then drawn at the model's size, as
the claims' scores do. A vault's photos are read
a chunk of pairs at a time (a pair of 1 MP RGB photos is 25 MB as the float copies the
score draws). Records go to ``ablation.jsonl`` under the ablation's keys.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Final

import numpy as np

from twinaudit.cli.estimate import tally
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer, F32Images, OracleInfo
from twinaudit.protocol.seeds import audit_seed, publication_bits
from twinaudit.verifier.scoring.fit import fit_image

from .ablation import Variant, ablation_nonce, key, variant_outcomes
from .audit import AuditLog
from .build import Workspace, rho_of
from .photos import MODEL_INPUT, ResizingOracle, fits_at_arbiter, is_photo_marker
from .specs import Plan

#: The scores of the labelled owner's default claims (the graded test's pairs are the
#: mixture's: the test only sizes the bets).
PHOTO_VARIANTS: Final = (Variant("C1", "dither", 1, margin=0.01), Variant("C3", "dither", 1))
#: Pairs scored at a time.
CHUNK: Final = 8


class RememberingOracle(ClassifierOracle):
    """An oracle that answers a query it has answered before from memory.

    The default scores both query each version once with a ``dither`` copy from the same
    stream, so the second score asks exactly the first one's queries: answered once.
    """

    def __init__(self, inner: ClassifierOracle) -> None:
        """Remember the answers of ``inner``."""
        self._inner = inner
        self._answers: dict[bytes, ClassifyAnswer] = {}

    @property
    def info(self) -> OracleInfo:
        """Return the wrapped oracle's self-description."""
        return self._inner.info

    def classify(self, images: F32Images) -> ClassifyAnswer:
        """Answer ``images`` as the wrapped oracle did, or ask it."""
        array = np.ascontiguousarray(images)
        digest = hashlib.sha256(str(array.shape).encode() + array.tobytes()).digest()
        if digest not in self._answers:
            self._answers[digest] = self._inner.classify(array)
        return self._answers[digest]

    def forget(self) -> None:
        """Let go of every answer."""
        self._answers.clear()


def score_photo_pairs(
    workspace: Workspace, plan: Plan, say: Callable[[str], None]
) -> dict[str, dict[str, object]]:
    """Score :data:`PHOTO_VARIANTS` on every pair of ``plan``'s photo vaults; return the records."""
    log = AuditLog(workspace.root / "ablation.jsonl")
    for model, spec in dict.fromkeys((j.model, j.vault) for j in plan.jobs):
        todo = [v for v in PHOTO_VARIANTS if key(model, spec, v) not in log.results]
        if not is_photo_marker(spec.marker) or not todo:
            continue
        if not (workspace.model_dir(model) / "model.pt").exists():
            continue
        net = workspace.load_model(model)
        inner = TorchClassifierOracle(net, n_classes=10, model_name=model.name)
        fit = fits_at_arbiter(model.trainer)
        remembering = RememberingOracle(inner if fit else ResizingOracle(inner))
        vault = workspace.vault(spec)
        rho = rho_of(vault)
        bits = publication_bits(vault.root, rho, len(vault))
        seed = audit_seed(vault.root, rho, ablation_nonce(model, spec))
        outcomes: dict[Variant, list[np.ndarray]] = {v: [] for v in todo}
        for start, v0, v1, labels, _ in vault.chunks():
            for first in range(0, len(v0), CHUNK):
                last = min(first + CHUNK, len(v0))
                offset = start + first
                versions = np.stack([v0[first:last], v1[first:last]], axis=1)
                if fit:
                    versions = fitted(versions)
                chunk_labels = [int(y) if y is not None else -1 for y in labels[first:last]]

                remembering.forget()  # the variants of this chunk share their queries
                for variant in todo:
                    outcomes[variant].append(
                        variant_outcomes(
                            remembering,
                            variant,
                            seed,
                            (versions, chunk_labels, bits[offset : offset + last - first]),
                            first=offset,
                        )
                    )
        for variant in todo:
            counted = tally(np.concatenate(outcomes[variant]))
            log.add(
                {
                    "key": key(model, spec, variant),
                    "model": model.name,
                    "wins": counted.wins,
                    "losses": counted.losses,
                    "ties": counted.ties,
                }
            )
        say(f"  all pairs: {model.name} with {spec.name}: {len(todo)} scores")
    return log.results


def fitted(versions: np.ndarray) -> np.ndarray:
    """Return ``versions`` ((n, 2, H, W, C) uint8) each fitted to the model's input."""
    return np.stack([[fit_image(version, MODEL_INPUT) for version in pair] for pair in versions])
