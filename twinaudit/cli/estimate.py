"""The owner's estimate of what an audit of her vault can find, measured before she publishes.

``twinaudit plan`` turns a per-pair success rate q into the pairs an audit needs; this
module measures q for *her* images, marks and ε. It plays the whole story once, in
process, with a stand-in for the practitioner:

1. publication bits are drawn as an arbiter would, from a simulated ρ (the real one
   is the arbiter's, drawn at escrow; which twin of a pair is published does not
   change how far apart the twins are);
2. a *proxy practitioner* — the network and recipe of the owner's proxy
   (:mod:`twinaudit.owner.marking.proxy`: a small CNN, Adam, cosine decay, pad-crop-flip),
   trained afresh from its own seed — learns the published twins of most of her pairs
   among labelled public images, her twins making up
   :data:`~twinaudit.cli.estimate_config.SHARE` of its training set (the paper's 10%),
   for :data:`~twinaudit.cli.estimate_config.STEPS` optimiser steps (the demo's
   practitioner: 500 epochs of 2,000 images), enough for it to fit its training set;
3. a *control* share of her pairs is left out of that training: the same model scored
   on pairs it never saw is what an audit of a model that did not use her data sees,
   so its rate must sit near 1/2 (a rate well away from it says the estimate is not
   to be trusted);
4. every pair is scored by the code a claim scores it with, for a simulated claim on
   all her pairs: the verifier's window logic (:func:`pair_scores`: the copies of spec
   §10.3 drawn from the streams ``augment/<i>/<v>``, her images first fitted to the
   practitioner's input as a claim fits them, the queries shuffled and asked a window
   at a time) and the claim protocol's score of each knowledge condition and outcome
   rule; the published twin wins, loses or ties;
5. for the measured rate, :func:`twinaudit.protocol.stats.power.plan` gives the detection
   probability and the expected pairs opened of a claim on all her pairs.

What it measures is a model that fits its training set as closely as this one does:
a practitioner who trains less, on more data, or a model that generalises more,
memorises each item less, and q falls (``docs/results.md``, the regime ladder: 40
epochs on 10,000 public images, a proxy practitioner at 90% train accuracy, showed no
signal even for marks the audited models showed at q̂ 0.95). It is an estimate for
choosing ε, the marker and N, not a promise about any model.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt
from scipy.stats import binomtest

from twinaudit.owner.claim_client import choose_score
from twinaudit.owner.marking.proxy import BATCH as TRAIN_BATCH
from twinaudit.owner.marking.proxy import square_images, train_proxy
from twinaudit.owner.vault import Vault
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.claim.claim_map import default_fit_shape
from twinaudit.protocol.claim.outcome import LOSS, LOST, SKIPPED, TIE, WIN, WON, outcome
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.items import ImageItem
from twinaudit.protocol.oracles.base import ClassifierOracle
from twinaudit.protocol.seeds import audit_seed, publication_bits
from twinaudit.protocol.stats.base import TiePolicy
from twinaudit.protocol.stats.power import plan
from twinaudit.verifier.windows import score_pairs, scorer_for

from .estimate_config import EstimateConfig

#: Images handed to the oracle at a time (it runs them in batches of its own).
BATCH: Final = 2048
#: The sign :func:`pair_outcomes` gives each outcome of a claim's tie rule ``skip``.
OUTCOME_SIGNS: Final = {WON: WIN, LOST: LOSS, SKIPPED: TIE}

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Tally:
    """Wins, losses and ties of the published twin over a set of pairs."""

    wins: int
    losses: int
    ties: int

    @property
    def untied(self) -> int:
        """Pairs that did not tie."""
        return self.wins + self.losses

    @property
    def q_hat(self) -> float | None:
        """The success rate over untied pairs (None when every pair tied)."""
        return self.wins / self.untied if self.untied else None

    @property
    def tie_share(self) -> float:
        """The share of pairs that tied."""
        total = self.untied + self.ties
        return self.ties / total if total else 0.0

    def interval(self, confidence: float = 0.95) -> tuple[float, float] | None:
        """Return the Wilson interval of q at ``confidence`` (None when every pair tied)."""
        if not self.untied:
            return None
        ci = binomtest(self.wins, self.untied).proportion_ci(confidence, method="wilson")
        return float(ci.low), float(ci.high)


@dataclass(frozen=True)
class ConditionEstimate:
    """One knowledge condition's measured rates and what a claim on all pairs would need."""

    knowledge: str
    score: dict[str, Value]
    used: Tally
    control: Tally
    #: P(detect) and E[pairs opened] at the measured q̂ and at its interval's low end,
    #: for a claim on every pair (None when the used pairs all tied).
    power: dict[str, float] | None
    power_low: dict[str, float] | None


@dataclass(frozen=True)
class Estimate:
    """The whole estimate: the proxy practitioner's accuracies and one entry per condition."""

    pairs: int
    used_pairs: int
    control_pairs: int
    public_images: int
    epochs: int
    train_accuracy: float
    owner_accuracy: float
    control_accuracy: float
    config: EstimateConfig
    conditions: list[ConditionEstimate] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """Return the estimate as plain JSON values (q̂ and intervals included)."""
        value = asdict(self)
        value["config"]["conditions"] = list(self.config.conditions)
        for entry, cond in zip(value["conditions"], self.conditions, strict=True):
            for name in ("used", "control"):
                tally: Tally = getattr(cond, name)
                entry[name]["q_hat"] = tally.q_hat
                entry[name]["tie_share"] = round(tally.tie_share, 4)
                interval = tally.interval()
                entry[name]["interval95"] = list(interval) if interval else None
        return value


def simulated_rho(root: bytes, seed: int) -> bytes:
    """Return the ρ the estimate draws publication bits from (an arbiter draws the real one)."""
    return hashlib.sha256(f"twinaudit estimate rho {seed}\x00".encode() + root).digest()


def simulated_nonce(root: bytes, seed: int) -> bytes:
    """Return the claim nonce of the estimate's simulated claim."""
    return hashlib.sha256(f"twinaudit estimate nonce {seed}\x00".encode() + root).digest()


def control_mask(n_pairs: int, share: float, seed: int) -> npt.NDArray[np.bool_]:
    """Return which pairs are kept out of training: ``round(share·N)`` of them, at random."""
    control = np.zeros(n_pairs, dtype=bool)
    picked = np.random.default_rng([seed, 0xC0]).permutation(n_pairs)[: round(share * n_pairs)]
    control[picked] = True
    return control


def vault_pairs(vault: Vault) -> tuple[npt.NDArray[np.uint8], list[int | None]]:
    """Return both versions of every pair, (N, 2, H, W, C), and the committed labels."""
    if vault.item_kind != "image":
        raise InputError(
            f"an estimate trains an image classifier; {vault.path} holds {vault.item_kind} items"
        )
    pairs: list[npt.NDArray[np.uint8]] = []
    labels: list[int | None] = []
    for _, v0, v1, chunk_labels, _ in vault.chunks():
        pairs.append(np.stack([v0, v1], axis=1))
        labels.extend(chunk_labels)
    return np.concatenate(pairs), labels


def score_specs(config: EstimateConfig, *, has_labels: bool) -> list[ScoreSpec]:
    """Return the claim's score for each condition of ``config`` (``owner claim``'s defaults).

    One default is left out: the tie margin ``owner claim`` asks for in C1 and C2 (spec
    §7.1). The estimates the results document validates were measured without it, so
    the C1 and C2 figures here are those of a claim with ``--margin 0``; a claim with the
    default margin finds at least as much (``docs/results.md``, the ablation's ``m=``
    rows).
    """
    specs: list[ScoreSpec] = []
    for knowledge in config.conditions:
        if knowledge not in ("C1", "C2", "C3", "C4"):
            raise InputError(f"estimate a condition C1..C4, not {knowledge!r}")
        choice = choose_score(
            "image",
            k=config.k,
            perturbation=config.perturbation,
            knowledge=knowledge,
            statistic=config.statistic if knowledge in ("C1", "C2") else None,
            has_labels=has_labels,
        )
        specs.append(
            ScoreSpec(
                k=choice.k,
                perturbation=choice.perturbation,
                knowledge=choice.knowledge,
                statistic=choice.statistic or "entropy",
            )
        )
    return specs


def estimate(
    vault: Vault,
    public_images: npt.NDArray[np.uint8],
    public_labels: npt.NDArray[np.int64],
    config: EstimateConfig,
    *,
    say: Progress | None = None,
) -> Estimate:
    """Measure the per-pair success rate of a claim on ``vault`` against a proxy practitioner.

    ``public_images`` (M, H, W, C) with ``public_labels`` are labelled images of the
    owner's domain that are not hers; the proxy practitioner learns her images resized
    to their side when they differ, and declares that side as its input, to which the
    scored claim fits her images. Raises :class:`~twinaudit.protocol.errors.InputError`
    for a vault that is not of labelled images, public images of another kind, or too
    few pairs.
    """
    tell = say or (lambda _: None)
    versions, committed = vault_pairs(vault)
    if any(label is None for label in committed):
        raise InputError(
            "the proxy practitioner learns the committed labels: mark the images with --labels"
        )
    labels = np.array(committed, dtype=np.int64)
    n_pairs = len(versions)
    if n_pairs < 20:
        raise InputError(f"an estimate needs at least 20 pairs, the vault holds {n_pairs}")
    side = _practitioner_side(public_images, versions)
    specs = score_specs(config, has_labels=True)
    rho = simulated_rho(vault.root, config.seed)
    bits = np.array(publication_bits(vault.root, rho, n_pairs), dtype=np.int64)
    control = control_mask(n_pairs, config.control_share, config.seed)
    published = versions[np.arange(n_pairs), bits]
    mine = square_images(published[~control], side)
    wanted = round(len(mine) * (1 - config.share) / config.share)
    if wanted < len(public_images):
        picked = np.sort(
            np.random.default_rng([config.seed, 0xB1]).permutation(len(public_images))[:wanted]
        )
        public_images, public_labels = public_images[picked], public_labels[picked]
    train_x = np.concatenate([square_images(public_images, side), mine])
    train_y = np.concatenate([public_labels, labels[~control]])
    epochs = max(1, math.ceil(config.steps / math.ceil(len(train_x) / TRAIN_BATCH)))
    tell(
        f"training the proxy practitioner on {len(public_images)} public images and "
        f"{len(mine)} published twins ({int(control.sum())} pairs held out as the control), "
        f"{epochs} epochs at {side}x{side}"
    )

    def progress(epoch: int, loss: float, accuracy: float) -> None:
        if epoch == epochs or epoch % max(1, epochs // 5) == 0:
            tell(f"  epoch {epoch}: loss {loss:.3f}, accuracy {accuracy:.3f}")

    model = train_proxy(train_x, train_y, epochs=epochs, seed=config.seed + 1, progress=progress)
    n_classes = max(int(train_y.max()) + 1, 2)  # as train_proxy sizes its last layer
    # The practitioner serves its model at the side it learnt at, as `oracle serve
    # --input-shape` would declare it, so a claim fits her images to it (spec §10.2 step 5).
    oracle = TorchClassifierOracle(
        model,
        n_classes=n_classes,
        probe_shape=(side, side, int(versions.shape[-1])),
        model_name="proxy-practitioner",
    )
    seed = audit_seed(vault.root, rho, simulated_nonce(vault.root, config.seed))
    results: list[ConditionEstimate] = []
    for spec in specs:
        tell(f"scoring {n_pairs} pairs in {spec.knowledge} ({spec.perturbation}, K = {spec.k})")
        outcome = pair_outcomes(
            oracle,
            versions=versions,
            labels=[int(y) for y in labels],
            bits=[int(b) for b in bits],
            seed=seed,
            spec=spec,
        )
        used = tally(outcome[~control])
        held = tally(outcome[control])
        results.append(
            ConditionEstimate(
                knowledge=spec.knowledge,
                score=dict(spec.to_value()),
                used=used,
                control=held,
                power=_power(config, n_pairs, used.q_hat, used.tie_share),
                power_low=_power(
                    config,
                    n_pairs,
                    interval[0] if (interval := used.interval()) else None,
                    used.tie_share,
                ),
            )
        )
    return Estimate(
        pairs=n_pairs,
        used_pairs=int((~control).sum()),
        control_pairs=int(control.sum()),
        public_images=len(public_images),
        epochs=epochs,
        train_accuracy=_accuracy(oracle, train_x, train_y),
        owner_accuracy=_accuracy(oracle, mine, labels[~control]),
        control_accuracy=_accuracy(
            oracle, square_images(published[control], side), labels[control]
        ),
        config=config,
        conditions=results,
    )


def _practitioner_side(
    public_images: npt.NDArray[np.uint8], versions: npt.NDArray[np.uint8]
) -> int:
    """Return the side the practitioner learns at: the public images' (square, ×4)."""
    if public_images.ndim != 4 or public_images.dtype != np.uint8 or not len(public_images):
        raise InputError("the public images must be a non-empty set of uint8 images")
    height, width, channels = public_images.shape[1:]
    if height != width or height % 4 or not 8 <= height <= 512:
        raise InputError(
            f"the public images are {height}x{width}: the proxy practitioner needs square "
            "images whose side is a multiple of 4 in 8..512"
        )
    if versions.shape[-1] != channels:
        raise InputError(
            f"the vault's images have {versions.shape[-1]} channels, the public images {channels}"
        )
    return int(height)


def pair_scores(
    oracle: ClassifierOracle,
    *,
    versions: npt.NDArray[np.uint8],
    labels: Sequence[int],
    seed: bytes,
    spec: ScoreSpec,
) -> list[tuple[float, float]]:
    """Return both versions' scores of every pair, as a claim with audit seed ``seed`` has them.

    Pair ``i`` is ``versions[i]`` (its two versions, (2, H, W, C)) with the committed
    label ``labels[i]`` (read in C1 and C3). The scores are the claim's own window and
    score code's (:func:`twinaudit.verifier.windows.score_pairs` with the window logic
    :func:`~twinaudit.verifier.windows.scorer_for` attaches to the score): each version's
    K copies drawn from the stream ``augment/<i>/<v>`` (spec §10.3), fitted first to the
    input shape the oracle declares where it declares one, as a claim started now fits
    them (``input_fit`` ``area``, spec §10.2 step 5), asked in windows of at most
    :data:`BATCH` copies and scored in binary64.
    """
    info = oracle.info
    spec.check_oracle(info)  # as a claim's start checks it (spec §10.2 step 1)
    scorer = scorer_for(spec, default_fit_shape(info, spec.item_kind))
    items = [
        (ImageItem(versions[i, 0], int(labels[i])), ImageItem(versions[i, 1], int(labels[i])))
        for i in range(len(versions))
    ]
    window = max(1, BATCH // (2 * spec.queries_per_version))
    scored = score_pairs(scorer, oracle, seed, range(len(items)), items, window=window)
    return [pair.scores for pair in scored]


def pair_outcomes(
    oracle: ClassifierOracle,
    *,
    versions: npt.NDArray[np.uint8],
    labels: Sequence[int],
    bits: Sequence[int],
    seed: bytes,
    spec: ScoreSpec,
) -> npt.NDArray[np.int8]:
    """Return +1, −1 or 0 per pair: the published twin won, lost or tied (spec §7.1).

    The scores are :func:`pair_scores`'; the outcome is the claim's
    (:func:`twinaudit.protocol.claim.outcome.outcome` with the score's tie margin), a tie
    counted as such (rule ``skip``) rather than decided by a coin. ``bits`` are the
    publication bits.
    """
    scores = pair_scores(oracle, versions=versions, labels=labels, seed=seed, spec=spec)
    out = np.zeros(len(scores), dtype=np.int8)
    for i, (pair, published) in enumerate(zip(scores, bits, strict=True)):
        char = outcome(
            pair,
            int(published),
            margin=spec.tie_margin,
            tie_rule=TiePolicy.SKIP,
            seed=seed,
            index=i,
        )
        out[i] = OUTCOME_SIGNS[char]
    return out


def tally(outcome: npt.NDArray[np.int8]) -> Tally:
    """Count the wins, losses and ties of :func:`pair_outcomes`' answer."""
    return Tally(int((outcome > 0).sum()), int((outcome < 0).sum()), int((outcome == 0).sum()))


def _probabilities(
    oracle: TorchClassifierOracle, images: npt.NDArray[np.float32]
) -> npt.NDArray[np.float64]:
    """Return the oracle's probability vectors for float32 images, in batches."""
    parts = []
    for start in range(0, len(images), BATCH):
        answer = oracle.classify(images[start : start + BATCH])
        assert answer.probabilities is not None  # the oracle answers probabilities
        parts.append(answer.probabilities)
    return np.concatenate(parts)


def _accuracy(
    oracle: TorchClassifierOracle, images: npt.NDArray[np.uint8], labels: npt.NDArray[np.int64]
) -> float:
    """Return the top-1 accuracy of the oracle's model on uint8 images."""
    if not len(images):
        return math.nan
    probabilities = _probabilities(oracle, images.astype(np.float32) / np.float32(255))
    return round(float(np.mean(probabilities.argmax(axis=1) == labels)), 4)


def _power(
    config: EstimateConfig, n_pairs: int, q: float | None, tie_share: float
) -> dict[str, float] | None:
    """Return P(detect) and E[pairs] of a claim on ``n_pairs`` pairs at rate ``q``."""
    if q is None:
        return None
    power = plan(
        config.test,
        n_pairs,
        min(max(q, 0.0), 1.0),
        config.p,
        tie_fraction=min(tie_share, 0.99),
        tie_rule=TiePolicy.SKIP,
    )
    return {
        "q": round(q, 4),
        "detection_probability": round(power.detection_probability, 4),
        "expected_pairs": round(power.expected_pairs, 1),
    }


__all__: Sequence[str] = (
    "ConditionEstimate",
    "Estimate",
    "EstimateConfig",
    "Tally",
    "estimate",
    "pair_outcomes",
    "pair_scores",
    "tally",
)
