"""What a foundation-model experiment trains and audits (paper §6, tables 6–8).

One :class:`Experiment` (a model kind, a seed, its :class:`Sizes`) has three models,
each a :class:`FoundationModel`:

- ``base``: pre-trained on ``n_base`` items disjoint from everything below (the
  paper's "Epoch 0" row: a model that never saw the owner's data);
- ``used``: ``base`` fine-tuned for ``epochs`` epochs on M = ``n_train`` items — the
  shared items and the published versions of the owner's N marked items (N = M/10 by
  default, the paper's share; ``owner_percent`` sets another share);
- ``clean``: ``base`` fine-tuned the same way on the shared items and N other items.

All three are audited with the owner's vault of that experiment (one claim each,
:meth:`Experiment.audit`). Every experiment draws its own data split, owner secret
and training randomness from its seed; the audit's arbiter randomness and claim
nonce derive from the vault root and the model, so a rerun reproduces every number.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from twinaudit.protocol.claim.functions import AnyScoreSpec
from twinaudit.verifier.scoring.encoder import EncoderSpec
from twinaudit.verifier.scoring.image_text import ImageTextSpec
from twinaudit.verifier.scoring.language import LanguageSpec

#: The model kinds, by command name.
KINDS: Final = ("encoder", "lm", "clip")
#: The three models of an experiment, in the order they are trained.
VARIANTS: Final = ("base", "used", "clean")
#: The audit's test and its false-detection bound (the paper's p).
TEST: Final = "mixture-e"
P: Final = 0.05
#: The null check: fresh draws of the arbiter's randomness (new publication bits and
#: audit order) per model that never saw the owner's data, each one more claim.
NULL_DRAWS: Final = 20
NULL_VARIANTS: Final = ("base", "clean")
#: Marks of the owner's images (encoder, CLIP): the classifier evaluation's.
MARKER: Final = "bernoulli"
EPSILON: Final = 32
#: K of the encoder score (the paper's default).
ENCODER_K: Final = 64
#: The encoder's view augmentation in training, and the audit's perturbation family.
ENCODER_PERTURBATION: Final = "random-resized-crop-flip"
#: The owner's share of the fine-tuning set, in percent (the paper's 10%), and the most
#: a run may set: the clean model swaps her N items for N others, and the shared part
#: keeps at least half of M.
OWNER_PERCENT: Final = 10
MAX_OWNER_PERCENT: Final = 50


@dataclass(frozen=True)
class Sizes:
    """How big an experiment is: items and epochs of each stage, and the utility sets.

    ``n_train`` is M (the fine-tuning set), of which N = ``n_train · owner_percent // 100``
    are the owner's (10%, the paper's share, unless set); ``n_utility`` items measure
    utility (test images, held-out sentences).
    """

    n_base: int
    base_epochs: int
    n_train: int
    epochs: int
    n_utility: int
    owner_percent: int = OWNER_PERCENT

    def __post_init__(self) -> None:
        """Check the sizes are usable (N ≥ 2 pairs, at least one epoch of fine-tuning)."""
        if self.n_train < 20 or self.n_base < 2 or self.n_utility < 10:
            raise ValueError(f"sizes too small: {self}")
        if self.epochs < 1 or self.base_epochs < 0:
            raise ValueError(f"epochs must be ≥ 1 (base ≥ 0): {self}")
        if not 1 <= self.owner_percent <= MAX_OWNER_PERCENT:
            raise ValueError(
                f"the owner's share must be 1–{MAX_OWNER_PERCENT}% of M, got {self.owner_percent}%"
            )
        if self.n_owner < 2:
            raise ValueError(f"sizes too small: N = {self.n_owner} owner's item(s) in {self}")

    @property
    def n_owner(self) -> int:
        """N, the owner's items in the fine-tuning set."""
        return self.n_train * self.owner_percent // 100

    @property
    def tag(self) -> str:
        """A file-system name for the sizes (the share appears only when not the default)."""
        share = "" if self.owner_percent == OWNER_PERCENT else f"-o{self.owner_percent}"
        return (
            f"b{self.n_base}x{self.base_epochs}-n{self.n_train}x{self.epochs}"
            f"-u{self.n_utility}{share}"
        )


#: Default sizes: one experiment (three models, three claims) in minutes on one CPU
#: core (see the results document for the measured times). The encoder fine-tunes 600
#: epochs: at 200 its fine-tuned model won only about 60% of the pairs and three seeds
#: detected once in the 100 pairs an experiment has (the results' notes).
DEFAULT_SIZES: Final = {
    "encoder": Sizes(n_base=3000, base_epochs=15, n_train=1000, epochs=600, n_utility=2000),
    "lm": Sizes(n_base=4000, base_epochs=2, n_train=2000, epochs=16, n_utility=500),
    "clip": Sizes(n_base=3000, base_epochs=20, n_train=1000, epochs=100, n_utility=2000),
}


def scaled_sizes(
    kind: str, *, n_train: int | None, epochs: int | None, owner_percent: int | None = None
) -> Sizes:
    """Return ``kind``'s default sizes with M, the epochs or the owner's share overridden.

    ``n_train`` sets M, the base set to 2·M and the utility sets to M (each at most its
    default); ``epochs`` sets the fine-tuning epochs and the base epochs to
    ``max(1, epochs // 2)`` (at most the default); ``owner_percent`` sets the owner's
    share of M (N = M · share // 100). Raises ValueError for sizes no experiment can have.
    """
    sizes = DEFAULT_SIZES[kind]
    if owner_percent is not None:
        sizes = replace(sizes, owner_percent=owner_percent)
    if n_train is not None:
        sizes = replace(
            sizes,
            n_train=n_train,
            n_base=min(sizes.n_base, 2 * n_train),
            n_utility=min(sizes.n_utility, n_train),
        )
    if epochs is not None:
        sizes = replace(
            sizes, epochs=epochs, base_epochs=min(sizes.base_epochs, max(1, epochs // 2))
        )
    return sizes


#: The command-line options that change an experiment's sizes, each with the
#: :func:`scaled_sizes` argument (and :class:`Sizes` field) it sets, in command order.
SIZE_OPTIONS: Final = {
    "--n-train": "n_train",
    "--epochs": "epochs",
    "--owner-share": "owner_percent",
}


def overrides(kind: str, sizes: Sizes) -> list[str] | None:
    """Return the options that give ``sizes`` to ``kind``'s command (``[]``: the defaults).

    None when no :data:`SIZE_OPTIONS` lead to exactly ``sizes``.
    """
    default = DEFAULT_SIZES[kind]
    given = {
        field: value
        for field in SIZE_OPTIONS.values()
        if (value := getattr(sizes, field)) != getattr(default, field)
    }
    try:
        if scaled_sizes(kind, **{f: given.get(f) for f in SIZE_OPTIONS.values()}) != sizes:
            return None
    except ValueError:
        return None
    return [
        word for flag, f in SIZE_OPTIONS.items() if f in given for word in (flag, str(given[f]))
    ]


@dataclass(frozen=True)
class Experiment:
    """One seed of one model kind at given sizes."""

    kind: str
    seed: int
    sizes: Sizes

    def __post_init__(self) -> None:
        """Check the kind."""
        if self.kind not in KINDS:
            raise ValueError(f"unknown model kind {self.kind!r}; known: {KINDS}")

    @property
    def name(self) -> str:
        """A file-system name that identifies the experiment."""
        return f"{self.kind}-s{self.seed}-{self.sizes.tag}"

    def model(self, variant: str) -> FoundationModel:
        """Return the experiment's ``variant`` model."""
        return FoundationModel(self, variant)

    @property
    def models(self) -> list[FoundationModel]:
        """Return the three models, base first."""
        return [self.model(v) for v in VARIANTS]

    def score(self) -> AnyScoreSpec:
        """Return the claim's score function for this kind (paper appendix C)."""
        if self.kind == "encoder":
            return EncoderSpec(k=ENCODER_K, perturbation=ENCODER_PERTURBATION)
        if self.kind == "lm":
            return LanguageSpec()
        return ImageTextSpec()


@dataclass(frozen=True)
class FoundationModel:
    """One model of an experiment: ``base``, ``used`` or ``clean``."""

    experiment: Experiment
    variant: str

    def __post_init__(self) -> None:
        """Check the variant."""
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; known: {VARIANTS}")

    @property
    def name(self) -> str:
        """A file-system name that identifies the model."""
        return f"{self.experiment.name}-{self.variant}"

    @property
    def audit_key(self) -> str:
        """The result key of the claim against this model."""
        return self.null_key(0)

    def null_key(self, draw: int) -> str:
        """Return the key of the claim under the ``draw``-th fresh arbiter randomness.

        Draw 0 is the randomness the owner's items were published with
        (:attr:`audit_key`).
        """
        score = self.experiment.score().to_value()
        parts = "-".join(str(score[k]) for k in sorted(score))
        key = f"{self.name}|{parts}|{TEST}-p{P:g}"
        return f"{key}-rho{draw}" if draw else key

    @property
    def null_keys(self) -> list[str]:
        """The null check's result keys for this model (none for a ``used`` model)."""
        if self.variant not in NULL_VARIANTS:
            return []
        return [self.null_key(d) for d in range(1, NULL_DRAWS + 1)]
