"""Output defences: wrappers a model's host can put around any classifier oracle.

A practitioner who knows he may be audited can change what his deployed model
answers without retraining it. The paper (Huang, Gong, Reiter, CCS 2024, §5.3.5 and
table ``classifier:robustness``) measures four such hosts; each is a
:class:`ClassifierOracle` around another (``twinaudit oracle serve --defence SPEC``,
the evaluation's ``attacks`` table):

``topk:κ``
    Top-κ masking: only the κ highest probabilities of each answer are kept (ties
    broken towards the lower class index), the others set to 0, and the kept ones
    rescaled to sum to 1 (an answer must be a probability vector, spec §10.2). The
    label is unchanged.
``memguard[:BUDGET[,TARGET]]``
    Output perturbation after MemGuard (Jia, Salem, Backes, Zhang, Gong, "MemGuard:
    Defending against Black-Box Membership Inference Attacks via Adversarial
    Examples", CCS 2019). MemGuard's phase I finds noise that keeps the label and
    moves a membership classifier's output to its decision boundary; phase II adds
    that noise only with the probability that keeps the expected L1 distortion within
    a budget. This variant's membership classifier is the confidence threshold the
    audit's entropy score amounts to, with its boundary at ``TARGET`` (default 0.6,
    above ½ so that the label survives): phase I moves the top probability to
    ``TARGET`` and rescales the others in proportion (their order kept), phase II
    applies it with probability ``min(1, BUDGET / ‖r‖₁)`` (``BUDGET`` default 0.5,
    the paper's "moderate distortion budget"). The coin is a hash of the query's
    bytes, so the same query always gets the same answer and no global RNG is read.
``pairdetect[:ε]``
    The paper's PairDetect: the host keeps the last :data:`DEFAULT_MEMORY` queries
    and their answers; a query whose pixel L∞ distance (levels of 255) to a
    remembered one is within ``2ε`` (default ε = 10, the CLI's mark bound) gets that
    query's answer again, so the two twins of a pair, queried the same way, tie.
    The paper's rule is a strict ``< 2ε``; twins whose marks reach ±ε (every PGD
    and Bernoulli mark) differ by exactly ``2ε`` and dithered copies by one level
    more, so this host uses ``≤ 2ε + 2`` (:data:`PAIR_SLACK`), the evasion table's
    variant, which catches them.
``pairdetect-features[:ε]``
    A stronger near-duplicate detector, for queries that are shifted and flipped
    copies (``pad-shift-flip``): each query is centred on its intensity centroid
    (undoing a shift), averaged over 2×2 blocks, and compared, as it is and
    mirrored (undoing a flip), with the remembered queries' features; a root mean
    square distance within ``2ε`` levels is a near-duplicate and gets the earlier
    answer. It also merges the K copies of one version.

Every wrapper reports itself: its Describe map's ``framework`` text gains ``+
defence SPEC`` (spec §10.1 lets the oracle report the software that runs the model),
so a claim, and the verdict that carries its map, shows what the host put in front
of the model. The model's name and digest are the wrapped oracle's. numpy only.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.errors import InputError
from twinaudit.protocol.oracles.base import (
    MAX_DESCRIPTION_TEXT_BYTES,
    ClassifierOracle,
    ClassifyAnswer,
    F32Images,
    OracleInfo,
)

#: The defences, by name (what ``--defence`` may name before its ``:``).
DEFENCES: Final = ("topk", "memguard", "pairdetect", "pairdetect-features")
#: PairDetect's mark bound ε (levels of 255) when none is given: the CLI's default marks'.
DEFAULT_EPSILON: Final = 10
#: MemGuard's expected L1 distortion budget (the paper's "moderate" 0.5).
MEMGUARD_BUDGET: Final = 0.5
#: MemGuard's decision boundary: the top probability its phase I moves every answer to.
MEMGUARD_TARGET: Final = 0.6
#: Queries (and answers) a PairDetect host remembers (oldest forgotten first).
DEFAULT_MEMORY: Final = 4096
#: Largest ``memory`` a PairDetect host may be given.
MAX_MEMORY: Final = 1 << 16
#: Levels PairDetect adds to ``2ε`` (dithered copies move by one level each).
PAIR_SLACK: Final = 2
#: Side of the square blocks the feature detector averages over.
FEATURE_POOL: Final = 2
#: Longest ``--defence`` text.
MAX_SPEC_CHARS: Final = 64


@dataclass(frozen=True)
class DefenceSpec:
    """One parsed ``--defence`` text: a name of :data:`DEFENCES` and its numbers."""

    name: str
    values: tuple[float, ...] = ()

    def __str__(self) -> str:
        """Return the canonical text (``topk:3``, ``memguard:0.5,0.6``, ``pairdetect:10``)."""
        if not self.values:
            return self.name
        return f"{self.name}:" + ",".join(f"{v:g}" for v in self.values)


def parse_defence(text: str) -> DefenceSpec:
    """Parse ``NAME[:V1[,V2]]`` into a :class:`DefenceSpec`; raise ``InputError``.

    ``topk`` needs κ ≥ 1 (an integer); ``memguard`` takes a budget > 0 and a target in
    (½, 1); the PairDetect hosts take ε ≥ 1 (levels). Defaults fill what is left out.
    """
    if not isinstance(text, str) or not 1 <= len(text) <= MAX_SPEC_CHARS:
        raise InputError(f"a defence is 1..{MAX_SPEC_CHARS} characters, such as 'topk:3'")
    name, _, rest = text.partition(":")
    if name not in DEFENCES:
        raise InputError(f"unknown defence {name!r}; known: {', '.join(DEFENCES)}")
    try:
        values = tuple(float(v) for v in rest.split(",")) if rest else ()
    except ValueError:
        raise InputError(f"defence {text!r}: the values after ':' must be numbers") from None
    if not all(np.isfinite(values)):
        raise InputError(f"defence {text!r}: values must be finite")
    if name == "topk":
        if len(values) != 1 or values[0] != int(values[0]) or values[0] < 1:
            raise InputError("topk takes one integer κ ≥ 1, as in 'topk:3'")
        return DefenceSpec(name, (float(int(values[0])),))
    if name == "memguard":
        if len(values) > 2:
            raise InputError("memguard takes at most a budget and a target, 'memguard:0.5,0.6'")
        budget = values[0] if values else MEMGUARD_BUDGET
        target = values[1] if len(values) > 1 else MEMGUARD_TARGET
        if budget <= 0 or not 0.5 < target < 1.0:
            raise InputError("memguard needs a budget > 0 and a target in (0.5, 1)")
        return DefenceSpec(name, (budget, target))
    if len(values) > 1 or (values and (values[0] < 1 or values[0] > 127)):
        raise InputError(f"{name} takes one mark bound ε in 1..127 levels, as in '{name}:10'")
    return DefenceSpec(name, (values[0] if values else float(DEFAULT_EPSILON),))


class DefenceOracle(ClassifierOracle):
    """A classifier oracle that changes another's answers; its Describe names the change."""

    def __init__(self, inner: ClassifierOracle, spec: DefenceSpec) -> None:
        """Wrap ``inner``; ``spec`` is what the Describe map's ``framework`` reports."""
        self.inner = inner
        self.spec = spec
        base = inner.info
        framework = f"{base.framework} + defence {spec}" if base.framework else f"defence {spec}"
        if len(framework.encode()) > MAX_DESCRIPTION_TEXT_BYTES:
            raise InputError("too many defences to report in the Describe map's framework text")
        self._info = replace(base, framework=framework)

    @property
    def info(self) -> OracleInfo:
        """Return the wrapped oracle's description with the defence in ``framework``."""
        return self._info

    def _require_probabilities(self) -> None:
        if self.inner.info.classify_output != "probabilities":
            raise InputError(
                f"defence {self.spec} changes probability vectors; the oracle answers labels"
            )


class TopKOracle(DefenceOracle):
    """Answer only the κ highest probabilities of each vector, rescaled to sum to 1."""

    def __init__(self, inner: ClassifierOracle, k: int) -> None:
        """Wrap ``inner`` (which must answer probabilities) with top-``k`` masking."""
        super().__init__(inner, DefenceSpec("topk", (float(k),)))
        self._require_probabilities()
        self.k = int(k)

    def classify(self, images: F32Images) -> ClassifyAnswer:
        """Classify with the inner oracle, then mask each row to its top κ."""
        answer = self.inner.classify(images)
        assert answer.probabilities is not None
        return ClassifyAnswer(probabilities=top_k(answer.probabilities, self.k))


def top_k(probabilities: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.float64]:
    """Return rows with all but their ``k`` largest entries zeroed, rescaled to sum to 1.

    Among equal probabilities the lower class index is kept (a stable sort).
    """
    order = np.argsort(-probabilities, axis=1, kind="stable")[:, :k]
    kept = np.zeros_like(probabilities)
    rows = np.arange(len(probabilities))[:, None]
    kept[rows, order] = probabilities[rows, order]
    total = kept.sum(axis=1, keepdims=True)
    out: npt.NDArray[np.float64] = kept / np.where(total > 0, total, 1.0)
    return out


class MemGuardOracle(DefenceOracle):
    """MemGuard-style output perturbation (see the module docstring)."""

    def __init__(
        self,
        inner: ClassifierOracle,
        budget: float = MEMGUARD_BUDGET,
        target: float = MEMGUARD_TARGET,
        *,
        key: bytes = b"",
    ) -> None:
        """Wrap ``inner`` (probabilities); ``key`` salts the per-query coin (a host's secret)."""
        super().__init__(inner, DefenceSpec("memguard", (budget, target)))
        self._require_probabilities()
        self.budget, self.target, self._key = float(budget), float(target), key

    def classify(self, images: F32Images) -> ClassifyAnswer:
        """Classify with the inner oracle, then perturb each row (phase I and II)."""
        answer = self.inner.classify(images)
        assert answer.probabilities is not None
        coins = np.array([self._coin(image) for image in images], dtype=np.float64)
        rows = memguard(answer.probabilities, self.target, self.budget, coins)
        return ClassifyAnswer(probabilities=rows)

    def _coin(self, image: npt.NDArray[np.float32]) -> float:
        digest = hashlib.sha256(
            b"twinaudit memguard coin\x00" + self._key + np.ascontiguousarray(image).tobytes()
        ).digest()
        return int.from_bytes(digest[:8], "big") / 2.0**64


def memguard(
    probabilities: npt.NDArray[np.float64],
    target: float,
    budget: float,
    coins: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Return MemGuard's answers: each row moved to top probability ``target`` when its coin says.

    Phase I: the label's probability becomes ``target``; the others are scaled by
    ``(1 − target) / (1 − p_y)`` (uniform when ``p_y`` is 1), which keeps their order and,
    with ``target > ½``, the label. Phase II: row ``n`` is changed when ``coins[n]`` (uniform
    in [0, 1)) is below ``min(1, budget / ‖r_n‖₁)``, so the expected L1 distortion of each
    answer is at most ``budget``.
    """
    out = probabilities.copy()
    n_classes = probabilities.shape[1]
    for n, row in enumerate(probabilities):
        label = int(np.argmax(row))
        rest = 1.0 - float(row[label])
        moved = np.full(n_classes, (1.0 - target) / (n_classes - 1))
        if rest > 1e-12:
            moved = row * ((1.0 - target) / rest)
        moved[label] = target
        distortion = float(np.abs(moved - row).sum())
        if distortion > 0 and coins[n] < min(1.0, budget / distortion):
            out[n] = moved
    return out


class PairDetectOracle(DefenceOracle):
    """Answer a near-duplicate of a remembered query with that query's answer.

    ``memory`` queries are remembered (0: only the earlier queries of the same call,
    the evaluation's within-request variant); ``slack`` levels are added to the ``2ε``
    bound, and ``inclusive`` makes it ``≤`` (``False``: the paper's strict ``<``). A
    query matching several remembered ones gets the oldest one's answer.
    ``recognised`` and ``queries`` count the queries answered from memory and all.
    """

    def __init__(
        self,
        inner: ClassifierOracle,
        epsilon: float = DEFAULT_EPSILON,
        *,
        memory: int = DEFAULT_MEMORY,
        slack: float = PAIR_SLACK,
        inclusive: bool = True,
        name: str = "pairdetect",
    ) -> None:
        """Wrap ``inner`` with a PairDetect cache for marks of bound ``epsilon`` levels."""
        super().__init__(inner, DefenceSpec(name, (float(epsilon),)))
        if not 0 <= memory <= MAX_MEMORY:
            raise InputError(f"memory must be in 0..{MAX_MEMORY}")
        self.epsilon, self.memory = float(epsilon), memory
        self.limit = 2.0 * float(epsilon) + slack
        self.inclusive = inclusive
        self._features: npt.NDArray[np.float32] | None = None
        self._coarse: npt.NDArray[np.float32] | None = None
        self._answers: list[npt.NDArray[np.float64] | np.int64] = []
        self._lock = threading.Lock()
        self.recognised = 0
        self.queries = 0

    # -- what a subclass changes -------------------------------------------------------

    def features(self, images: F32Images) -> tuple[npt.NDArray[np.float32], ...]:
        """Return per image its pixels in levels and their 4×4 block means (a lower bound)."""
        quantised = levels(images).astype(np.float32)
        coarse = np.stack([pooled(image, 4) for image in quantised])
        return quantised.reshape(len(images), -1), coarse.reshape(len(images), -1)

    def distances(
        self, query: npt.NDArray[np.float32], stored: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        """Return the L∞ distance of ``query`` (one row) to each row of ``stored``.

        Applied to block means it bounds the pixels' distance from below (a block's
        mean moves by at most its largest pixel change), so it also prefilters.
        """
        out: npt.NDArray[np.float32] = np.abs(stored - query).max(axis=1)
        return out

    # -- the cache ---------------------------------------------------------------------

    def _near(self, distance: npt.NDArray[np.float32]) -> npt.NDArray[np.bool_]:
        out: npt.NDArray[np.bool_] = (
            distance <= self.limit if self.inclusive else distance < self.limit
        )
        return out

    def classify(self, images: F32Images) -> ClassifyAnswer:
        """Classify with the inner oracle; answer near-duplicates from memory."""
        answer = self.inner.classify(images)
        source = answer.probabilities if answer.probabilities is not None else answer.labels
        assert source is not None
        rows: list[npt.NDArray[np.float64] | np.int64] = list(source)
        fine, coarse = self.features(images)
        with self._lock:
            kept = self._features is not None and self.memory > 0
            past = len(self._answers) if kept else 0
            if kept:
                assert self._features is not None
                assert self._coarse is not None
                fine = np.concatenate([self._features, fine])
                coarse = np.concatenate([self._coarse, coarse])
            answers = [*(self._answers if kept else []), *rows]
            for n in range(past, len(answers)):
                if n == 0:
                    continue
                candidates = np.flatnonzero(self._near(self.distances(coarse[n], coarse[:n])))
                if not len(candidates):
                    continue
                exact = self._near(self.distances(fine[n], fine[candidates]))
                if exact.any():
                    answers[n] = answers[int(candidates[int(np.argmax(exact))])]
                    self.recognised += 1
            self.queries += len(rows)
            if self.memory:
                self._features = fine[-self.memory :]
                self._coarse = coarse[-self.memory :]
                self._answers = answers[-self.memory :]
            rows = answers[past:]
        if answer.probabilities is not None:
            return ClassifyAnswer(probabilities=np.stack(rows).astype(np.float64))
        return ClassifyAnswer(labels=np.array(rows, dtype=np.int64))


class FeaturePairDetectOracle(PairDetectOracle):
    """PairDetect on shift- and flip-undone features (see the module docstring)."""

    def __init__(
        self,
        inner: ClassifierOracle,
        epsilon: float = DEFAULT_EPSILON,
        *,
        memory: int = DEFAULT_MEMORY,
    ) -> None:
        """Wrap ``inner``; near-duplicates are within ``2ε`` levels RMS in feature space."""
        super().__init__(
            inner, epsilon, memory=memory, slack=0.0, inclusive=True, name="pairdetect-features"
        )

    def features(self, images: F32Images) -> tuple[npt.NDArray[np.float32], ...]:
        """Return per image its centred, pooled features and its mirror's, fine and coarse.

        Each row holds the image's features, then its mirror's; the coarse rows are
        the same pooled twice as much (their RMS distance bounds the fine one's below).
        """
        quantised = levels(images).astype(np.float32)
        fine, coarse = [], []
        for image in quantised:
            plain, mirror = pooled(centred(image)), pooled(centred(image[:, ::-1]))
            fine.append(np.concatenate([plain.ravel(), mirror.ravel()]))
            coarse.append(np.concatenate([pooled(plain).ravel(), pooled(mirror).ravel()]))
        return np.stack(fine), np.stack(coarse)

    def distances(
        self, query: npt.NDArray[np.float32], stored: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        """Return the RMS distance of ``query`` (either orientation) to each stored query."""
        half = stored.shape[1] // 2
        remembered = stored[:, :half]
        plain = np.sqrt(np.mean((remembered - query[:half]) ** 2, axis=1))
        mirror = np.sqrt(np.mean((remembered - query[half:]) ** 2, axis=1))
        out: npt.NDArray[np.float32] = np.minimum(plain, mirror)
        return out


def levels(images: F32Images) -> npt.NDArray[np.int16]:
    """Return float32 images in [0, 1] as integer levels 0..255 (rounded)."""
    return np.rint(images.astype(np.float64) * 255.0).astype(np.int16)


def centred(image: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Return an (H, W, C) image moved (zeros shifted in) so its intensity centroid is central."""
    height, width = image.shape[:2]
    mass = image.sum(axis=2)
    total = float(mass.sum())
    if total <= 0:
        return image
    rows = float((mass.sum(axis=1) * np.arange(height)).sum()) / total
    cols = float((mass.sum(axis=0) * np.arange(width)).sum()) / total
    down = round((height - 1) / 2 - rows)
    right = round((width - 1) / 2 - cols)
    out = np.zeros_like(image)
    src_rows = slice(max(0, -down), min(height, height - down))
    dst_rows = slice(max(0, down), min(height, height + down))
    src_cols = slice(max(0, -right), min(width, width - right))
    dst_cols = slice(max(0, right), min(width, width + right))
    out[dst_rows, dst_cols] = image[src_rows, src_cols]
    return out


def pooled(image: npt.NDArray[np.float32], size: int = FEATURE_POOL) -> npt.NDArray[np.float32]:
    """Return the (H/size, W/size, C) means of an image's size × size blocks (edges cut)."""
    height, width, channels = image.shape
    h, w = height // size, width // size
    blocks = image[: h * size, : w * size].reshape(h, size, w, size, channels)
    out: npt.NDArray[np.float32] = blocks.mean(axis=(1, 3))
    return out


def wrap(oracle: ClassifierOracle, specs: Sequence[str | DefenceSpec]) -> ClassifierOracle:
    """Return ``oracle`` behind each defence of ``specs`` in turn (the first innermost)."""
    for item in specs:
        spec = parse_defence(item) if isinstance(item, str) else item
        if spec.name == "topk":
            oracle = TopKOracle(oracle, int(spec.values[0]))
        elif spec.name == "memguard":
            oracle = MemGuardOracle(oracle, spec.values[0], spec.values[1])
        elif spec.name == "pairdetect":
            oracle = PairDetectOracle(oracle, spec.values[0])
        else:
            oracle = FeaturePairDetectOracle(oracle, spec.values[0])
    return oracle
