"""What an evaluation trains and audits: model specs, audit specs, and the tables' plans.

A :class:`ModelSpec` names one practitioner's model completely (data split seed,
training-set size, recipe, epochs, and which of the owner's published images it
trained on); a :class:`AuditSpec` names one claim against it (knowledge condition,
K, perturbation family, test). A table's :class:`Plan` lists the models it needs and
the audits to run on each; models are shared between tables (the main table's
models are the fraction sweep's end points and the ε table's ε = 32 column, and the
K and null tables audit them again).

A spec's ``training`` tells its trainings apart: 0 is the one the tables share, n ≥ 1
another, independent training of the same data (its own initial weights, batches and
augmentation). The recipe table's pad-crop-flip row and the ε table's clean models are
second trainings of main's models, so that those cells are measurements of their
own, not main's claims again (recipe × pad-shift-flip would repeat main's C1 and C3
claims) and so that false detections are counted on more clean models than the five
the main, K and null tables audit.

Every experiment with seed ``s`` draws its own data split, its own owner secret
(hence marks, salts and publication bits) and its own training randomness; the
audit's arbiter randomness (rho) and claim nonce are derived from the vault root
and the audit, so a rerun reproduces every number.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

#: The regime of ``make demo`` (see README "What the demo chose"): every table
#: varies one thing away from it.
N_TRAIN: Final = 2000
EPOCHS: Final = 500
EPSILON: Final = 32
MARKER: Final = "bernoulli"
RECIPE: Final = "pad-crop-flip"
K: Final = 32
PERTURBATION: Final = "pad-shift-flip"
TEST: Final = "mixture-e"
P: Final = 0.05
#: The owner's share of a split, in percent of the practitioner's training set.
OWNER_PERCENT: Final = 10

TRAINERS: Final = ("demo", "resnet-sgd", "resnet18-sgd")
CONDITIONS: Final = ("C1", "C2", "C3", "C4")
FRACTIONS: Final = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
EPSILONS: Final = (10, 20, 32, 48)
KS: Final = (4, 8, 16, 32, 64)
RECIPES: Final = ("none", "pad-crop-flip", "random-resized-crop")
FAMILIES: Final = ("none", "pad-shift-flip", "random-resized-crop")
TESTS: Final = ("mixture-e", "pprm-chernoff")


#: What :attr:`ModelSpec.attack` may be (:mod:`evaluation.attack_training`).
ATTACK_NAME: Final = re.compile(r"(dp|gauss)([0-9]+(\.[0-9]+)?)|advreg|markperturb")


@dataclass(frozen=True)
class VaultSpec:
    """The owner's marked pairs of experiment ``seed``: her share of that seed's split."""

    seed: int
    n_train: int = N_TRAIN
    epsilon: int = EPSILON
    marker: str = MARKER
    #: Her share of the split in percent of ``n_train`` (:func:`split_name`).
    owner_percent: int = OWNER_PERCENT

    @property
    def name(self) -> str:
        """A file-system name that identifies the vault."""
        split = split_name(self.seed, self.n_train, self.owner_percent)
        return f"{split}-{self.marker}{self.epsilon}"


def split_name(seed: int, n_train: int, owner_percent: int = OWNER_PERCENT) -> str:
    """Return the name of the data split of experiment ``seed``, ``n_train`` and her share.

    The share is named only when it is not :data:`OWNER_PERCENT`, so every name made
    before it could differ is unchanged.
    """
    share = "" if owner_percent == OWNER_PERCENT else f"-o{owner_percent}"
    return f"s{seed}-n{n_train}{share}"


@dataclass(frozen=True)
class ModelSpec:
    """One practitioner's model.

    ``fraction`` of the owner's published images are in its training set (the rest of
    her share is replaced by other images, so the set always has ``n_train`` images);
    0 is a clean model, whose marks do not matter (its ``epsilon`` is normalised to 0
    and its ``marker`` to the default: the vault it is audited with is the plan's).
    """

    seed: int
    fraction: float = 1.0
    epsilon: int = EPSILON
    n_train: int = N_TRAIN
    epochs: int = EPOCHS
    recipe: str = RECIPE
    marker: str = MARKER
    #: Which training of this spec: 0 the one tables share, n ≥ 1 an independent other.
    training: int = 0
    #: How the practitioner trains: ``demo`` (the demo's wide CNN, Adam, cosine decay) or
    #: ``resnet-sgd`` (:mod:`evaluation.standard`: a small ResNet, SGD, one-cycle) or
    #: ``resnet18-sgd`` (the same recipe on ResNet-18, batches of 512, rung c).
    trainer: str = "demo"
    #: A training-time attack (:mod:`evaluation.attack_training`): ``dp<σ>``,
    #: ``gauss<σ>``, ``advreg``, ``markperturb``; "" trains the ordinary way.
    attack: str = ""
    #: The owner's share of the split in percent of ``n_train`` (at most 50): the set is
    #: always ``n_train`` images, her published ones replacing as many others.
    owner_percent: int = OWNER_PERCENT

    def __post_init__(self) -> None:
        """Normalise a clean model's marks (it saw none)."""
        if not 0.0 <= self.fraction <= 1.0:
            raise ValueError(f"fraction must be in [0, 1], not {self.fraction}")
        if self.training < 0:
            raise ValueError(f"training must be 0 or more, not {self.training}")
        if self.trainer not in TRAINERS:
            raise ValueError(f"unknown trainer {self.trainer!r}; known: {TRAINERS}")
        if self.attack and (self.trainer != "demo" or not ATTACK_NAME.fullmatch(self.attack)):
            raise ValueError(f"unknown training attack {self.attack!r} (demo trainer only)")
        if not 1 <= self.owner_percent <= 50:
            raise ValueError(f"owner_percent must be in 1..50, not {self.owner_percent}")
        if self.fraction == 0.0:
            object.__setattr__(self, "epsilon", 0)
            object.__setattr__(self, "marker", MARKER)

    @property
    def clean(self) -> bool:
        """Whether the model saw none of the owner's published images."""
        return self.fraction == 0.0

    @property
    def name(self) -> str:
        """A file-system name that identifies the model."""
        data = "clean" if self.clean else f"{self.marker}{self.epsilon}-f{self.fraction:.1f}"
        again = f"-t{self.training}" if self.training else ""
        trainer = "" if self.trainer == "demo" else f"-{self.trainer}"
        attack = f"-{self.attack}" if self.attack else ""
        split = split_name(self.seed, self.n_train, self.owner_percent)
        return f"{split}{trainer}-{self.recipe}-e{self.epochs}{attack}-{data}{again}"

    @property
    def training_seed(self) -> int:
        """Return the seed of its training randomness (initial weights, batches, augmentation).

        Training 0 uses the experiment's seed; training n ≥ 1 a seed derived from both,
        so no two trainings of one experiment, nor trainings of two experiments, share it.
        """
        if self.training == 0:
            return self.seed
        label = f"twinaudit evaluation training {self.seed} {self.training}".encode()
        return int.from_bytes(hashlib.sha256(label).digest()[:4], "big")

    def vault(self, epsilon: int | None = None, marker: str | None = None) -> VaultSpec:
        """Return the vault its published images came from (or it is audited against)."""
        eps = self.epsilon if epsilon is None else epsilon
        return VaultSpec(
            self.seed, self.n_train, eps or EPSILON, marker or self.marker, self.owner_percent
        )


#: How :attr:`ModelSpec.name` ends for a clean model: ``-clean``, then ``-t<n>`` for a
#: training after the first.
_CLEAN_NAME: Final = re.compile(r"-clean(-t[1-9][0-9]*)?$")


def is_clean_name(name: str) -> bool:
    """Return whether ``name`` (a :attr:`ModelSpec.name`, as records keep it) is a clean one."""
    return _CLEAN_NAME.search(name) is not None


@dataclass(frozen=True)
class AuditSpec:
    """One claim's score and test (``window`` pairs per request, as the CLI's default)."""

    knowledge: str = "C3"
    k: int = K
    perturbation: str = PERTURBATION
    test: str = TEST
    p: float = P
    #: 0: the vault's own arbiter randomness; n ≥ 1: the n-th fresh draw of it (the
    #: ``null`` table re-randomises the publication bits to measure false detections).
    rho_draw: int = 0
    #: The classifier score's statistic (spec §10.3): the paper's ``entropy`` or ``logit``.
    statistic: str = "entropy"
    #: The score's tie margin (spec §7.1, §10.3): 0 ties equal scores only.
    margin: float = 0.0
    #: An output defence the model's host answers through
    #: (:mod:`twinaudit.practitioner.defences`, e.g. ``topk:1``); "" answers honestly.
    defence: str = ""

    @property
    def name(self) -> str:
        """A compact identifier for result keys (defaults of the later fields not named)."""
        name = f"{self.knowledge}-k{self.k}-{self.perturbation}-{self.test}-p{self.p:g}"
        if self.statistic != "entropy":
            name += f"-{self.statistic}"
        if self.margin:
            name += f"-m{self.margin:g}"
        if self.defence:
            name += f"-def[{self.defence}]"
        return f"{name}-rho{self.rho_draw}" if self.rho_draw else name


@dataclass(frozen=True)
class Job:
    """An audit of ``model`` with the pairs of ``vault``."""

    model: ModelSpec
    vault: VaultSpec
    audit: AuditSpec

    @property
    def key(self) -> str:
        """The result key of this audit."""
        return f"{self.model.name}|{self.vault.name}|{self.audit.name}"


@dataclass
class Plan:
    """The models and audits one table needs."""

    table: str
    title: str
    models: list[ModelSpec] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)

    def add(
        self,
        model: ModelSpec,
        audits: Sequence[AuditSpec],
        epsilon: int | None = None,
        marker: str | None = None,
    ) -> None:
        """Need ``model`` and audit it with each of ``audits`` (against its own vault).

        ``epsilon`` and ``marker`` name another vault of the same seed (a clean model's).
        """
        if model not in self.models:
            self.models.append(model)
        vault = model.vault(epsilon, marker)
        self.jobs.extend(Job(model, vault, audit) for audit in audits)


def _conditions() -> list[AuditSpec]:
    return [AuditSpec(knowledge=c, test=t) for c in CONDITIONS for t in TESTS]


def plan_main(seeds: Sequence[int]) -> Plan:
    """Plan C1–C4 with both tests on the demo's regime, and the same claims on clean models."""
    plan = Plan("main", "Knowledge conditions C1–C4 (and false detections)")
    for seed in seeds:
        plan.add(ModelSpec(seed), _conditions())
        plan.add(ModelSpec(seed, fraction=0.0), _conditions())
    return plan


def plan_fraction(seeds: Sequence[int]) -> Plan:
    """Plan detection as the share of the published data the model trained on goes 0 → 1."""
    plan = Plan(
        "fraction", "Fraction of the published data used (the paper's figure `fig:used_published`)"
    )
    audits = [AuditSpec(knowledge="C1"), AuditSpec(knowledge="C3")]
    for fraction in FRACTIONS:
        for seed in seeds:
            plan.add(ModelSpec(seed, fraction=fraction), audits)
    return plan


def plan_epsilon(seeds: Sequence[int]) -> Plan:
    """Plan the marks' bound ε: models trained on each ε's publication; clean ones too."""
    plan = Plan("epsilon", "The marks' bound ε (the paper's table `classifier:markbound`)")
    audits = [AuditSpec(knowledge="C1"), AuditSpec(knowledge="C3")]
    for epsilon in EPSILONS:
        for seed in seeds:
            plan.add(ModelSpec(seed, epsilon=epsilon), audits)
            # Clean models of their own (main's, trained again): more clean models in
            # the document's false-detection evidence than the main, K and null tables'.
            plan.add(ModelSpec(seed, fraction=0.0, training=1), audits, epsilon=epsilon)
    return plan


def plan_k(seeds: Sequence[int]) -> Plan:
    """Plan K, the perturbed copies per version (audits only: the main table's models)."""
    plan = Plan("k", "Perturbed copies per version K (the paper's table `classifier:numaug`)")
    audits = [AuditSpec(knowledge=c, k=k) for c in ("C1", "C3") for k in KS]
    for seed in seeds:
        plan.add(ModelSpec(seed), audits)
        plan.add(ModelSpec(seed, fraction=0.0), audits)
    return plan


def plan_recipe(seeds: Sequence[int]) -> Plan:
    """Plan the training recipe against the audit's perturbation family (C1 and C3)."""
    plan = Plan("recipe", "Training recipe × the audit's perturbation family")
    audits = [
        AuditSpec(knowledge=c, perturbation=family) for c in ("C1", "C3") for family in FAMILIES
    ]
    for recipe in RECIPES:
        # Main's recipe trained again: the row's pad-shift-flip cell would otherwise be
        # main's C1 and C3 claims a second time, not a measurement of its own.
        training = 1 if recipe == RECIPE else 0
        for seed in seeds:
            plan.add(ModelSpec(seed, recipe=recipe, training=training), audits)
            plan.add(ModelSpec(seed, fraction=0.0, recipe=recipe, training=training), audits)
    return plan


#: The marks of ``twinaudit owner mark`` with no options and no labels (pgd on
#: EfficientNet-Lite0, ε = 10); its default with labels before ``pgdown`` became it.
CLI_MARKER: Final = "pgd"
CLI_EPSILON: Final = 10
#: The claim ``twinaudit owner claim`` made with no score options before issue #19
#: (K = 1, no perturbation), for an oracle that answers probabilities (C1) and one that
#: answers labels (C3); and the default since: the same with ``dither`` copies.
OLD_CLI_AUDITS: Final = (
    AuditSpec(knowledge="C1", k=1, perturbation="none"),
    AuditSpec(knowledge="C3", k=1, perturbation="none"),
)
CLI_AUDITS: Final = (
    AuditSpec(knowledge="C1", k=1, perturbation="dither"),
    AuditSpec(knowledge="C3", k=1, perturbation="dither"),
)
#: PGD in the features of the owner's proxy classifier (``twinaudit owner proxy``).
PROXY_MARKER: Final = "pgdproxy"
#: PGD in the features of a proxy trained on the owner's own labelled items only
#: (:func:`twinaudit.owner.marking.proxy.train_own_proxy`): no public data needed.
OWN_PROXY_MARKER: Final = "pgdown"
#: The same proxy trained until it fits her items (``MarkingConfig.proxy_converge``, the
#: CLI's default since issue #39 part 3) instead of every one of its 3,160 steps.
OWN_FIT_PROXY_MARKER: Final = "pgdownfit"
#: The same proxy trained until it fits her items on the schedule ``owner mark`` trained
#: before the epoch floor of :func:`twinaudit.owner.marking.proxy.own_proxy_epochs`:
#: whole epochs of at least 3,160 steps, however many items (the ``proxylarge`` table's
#: other side).
OWN_FIT_STEPS_MARKER: Final = "pgdownfitsteps"
#: The same proxy trained on the owner's own items with pseudo-labels instead of labels:
#: their k-means clusters in EfficientNet-Lite0's features (``--extractor proxy-clusters``).
CLUSTERS_PROXY_MARKER: Final = "pgdclusters"
#: The same proxy left untrained (its seeded initial weights): a control for what training
#: the proxy adds.
RANDOM_PROXY_MARKER: Final = "pgduntrained"
#: Tie margins measured on the probability conditions (spec §7.1): 0.1 was the best of
#: 0.01–0.3 on rung (a)'s models over all pairs, 0.01 keeps more pairs where a model is
#: near-certain of both twins (``owner claim``'s default, ``twinaudit.owner.claim_client``).
MARGINS: Final = (0.01, 0.1)
#: The probability conditions' claims with those margins (C1 with labels, C2 without).
MARGIN_AUDITS: Final = tuple(
    AuditSpec(knowledge=knowledge, k=1, perturbation="dither", margin=margin)
    for margin in MARGINS
    for knowledge in ("C1", "C2")
)
#: The graded test (spec §7.5) on the probability conditions at the default margin:
#: bets sized by each pair's gap over the margin.
GRADED_AUDITS: Final = tuple(
    AuditSpec(knowledge=knowledge, k=1, perturbation="dither", margin=0.01, test="mixture-graded")
    for knowledge in ("C1", "C2")
)
#: The marks rung (a) compares: the CLI's default, PGD on the owner's proxy trained on
#: public data, and PGD on a proxy trained on her own items.
LADDER_MARKERS: Final = (CLI_MARKER, PROXY_MARKER, OWN_PROXY_MARKER)
#: Fresh arbiter randomness per clean model for the null check of the default claim.
LADDER_NULL_DRAWS: Final = 20


def _ladder_audits() -> list[AuditSpec]:
    """Return the ladder's claims: the CLI's defaults, then the table's family at K = 32."""
    return [
        *OLD_CLI_AUDITS,
        *CLI_AUDITS,
        *(AuditSpec(knowledge=c) for c in ("C1", "C3")),
        AuditSpec(knowledge="C1", statistic="logit"),
        AuditSpec(knowledge="C3", perturbation="pad-shift-flip-dither"),
        *MARGIN_AUDITS,
        *GRADED_AUDITS,
    ]


def _null_audits(
    draws: int = LADDER_NULL_DRAWS, audits: Sequence[AuditSpec] = CLI_AUDITS
) -> list[AuditSpec]:
    """Return ``audits`` (the default claim) under ``draws`` fresh publication bits."""
    return [replace(audit, rho_draw=draw) for audit in audits for draw in range(1, draws + 1)]


#: The claim with labels the evasion and attacks tables found to survive hosts that read
#: the queries: C3 with the training family and a dither, K = 32. Measured as a candidate
#: default and not made one (it depends on the training recipe: evaluation/notes.md);
#: its null checks stay in the plans, as for any documented claim.
FAMILY_AUDITS: Final = (AuditSpec(knowledge="C3", perturbation="pad-shift-flip-dither"),)
#: C4 with the training family at K = 32, as the attacks table claims it: the claim
#: ``owner claim`` filed for an unlabelled vault against a label-only oracle before the
#: word ``unlabelled`` resolved to C4 for every oracle; its null checks go with it.
LABEL_ONLY_AUDITS: Final = (AuditSpec(knowledge="C4"),)
#: The claim ``owner claim`` files by default for an unlabelled vault, whatever the oracle
#: answers (the word ``unlabelled`` with ``twinaudit.owner.claim_client.UNLABELLED_FAMILY``): C4
#: with the training family dithered, whose copies are never a placement of a published
#: file (the evasion table's ``exact`` host lists those and defeats plain
#: ``pad-shift-flip``).
UNLABELLED_DEFAULT_AUDITS: Final = (
    AuditSpec(knowledge="C4", perturbation="pad-shift-flip-dither"),
)


#: The claims of an owner without labels (nothing committed to a label): C2 from
#: probabilities (K = 1 ``dither``, tie margin 0.01, the graded test), her default before
#: these tables measured it against C4; C4 with the training family (``LABEL_ONLY_AUDITS``);
#: and C4 as she files it by default since (``UNLABELLED_DEFAULT_AUDITS``).
UNLABELLED_AUDITS: Final = (GRADED_AUDITS[1], *LABEL_ONLY_AUDITS, *UNLABELLED_DEFAULT_AUDITS)
#: The labelled owner's default claims on the same marks, for comparison: C1 as
#: ``owner claim`` files it from probabilities, and C3 from labels.
LABELLED_DEFAULT_AUDITS: Final = (GRADED_AUDITS[0], CLI_AUDITS[1])


def _clean_audits() -> list[AuditSpec]:
    """Return a clean model's claims at rungs (a) and (b): the table's, then the null checks."""
    return [
        *_ladder_audits(),
        *_null_audits(),
        *_null_audits(audits=MARGIN_AUDITS),
        *_null_audits(audits=GRADED_AUDITS),
        *_null_audits(audits=FAMILY_AUDITS),
        *_null_audits(audits=LABEL_ONLY_AUDITS),
    ]


def plan_ladder(seeds: Sequence[int]) -> Plan:
    """Plan the regime ladder's rung (a): the demo's regime with ε = 10 marks.

    Three kinds of marks, each with its own used models: ``pgd`` on EfficientNet-Lite0
    (the CLI's default without labels), ``pgdproxy`` (PGD in the features of a proxy
    classifier trained on public data, ``twinaudit owner proxy``) and ``pgdown`` (the
    same on a proxy trained on the owner's own 200 items, the CLI's default with
    labels). The clean models are main's trained a second time (``-t1``, as the
    recipe and ε tables use them), audited against every vault of their seed.
    """
    plan = Plan("ladder", "Regime ladder: the CLI's default marks and claims")
    audits = _ladder_audits()
    for seed in seeds:
        for marker in LADDER_MARKERS:
            plan.add(ModelSpec(seed, epsilon=CLI_EPSILON, marker=marker), audits)
        clean = ModelSpec(seed, fraction=0.0, training=1)
        for marker in LADDER_MARKERS:
            plan.add(clean, _clean_audits(), epsilon=CLI_EPSILON, marker=marker)
    return plan


def plan_unlabelled(seeds: Sequence[int]) -> Plan:
    """Plan rung (a) for an owner without labels: PGD on a proxy of her images' clusters.

    ``pgdclusters``: the proxy CNN trained on the owner's own 200 items, each item's class
    its k-means cluster in EfficientNet-Lite0's features (``--extractor proxy-clusters``),
    against the ladder's ``pgd`` (EfficientNet-Lite0 itself) and ``pgdown`` (the proxy
    trained on her labels), whose rows are the ``ladder`` table's. The claims an owner
    without labels files, and the labelled defaults for comparison; the clean models are
    the ladder's (``-t1``), with the unlabelled claims under fresh publication bits.
    """
    plan = Plan(
        "unlabelled",
        "Regime ladder (a) for an owner without labels: marks on a proxy of her images' "
        "clusters (`pgdclusters`)",
    )
    audits = [*UNLABELLED_AUDITS, *LABELLED_DEFAULT_AUDITS]
    for seed in seeds:
        plan.add(ModelSpec(seed, epsilon=CLI_EPSILON, marker=CLUSTERS_PROXY_MARKER), audits)
        plan.add(
            ModelSpec(seed, fraction=0.0, training=1),
            [*audits, *_null_audits(audits=UNLABELLED_AUDITS)],
            epsilon=CLI_EPSILON,
            marker=CLUSTERS_PROXY_MARKER,
        )
    return plan


#: The clean models of the ``proxyfit`` table: the demo's regime without the owner's items,
#: trained a fourth time (``-t3``), the ladder's (``-t1``) and the photo rung's (``-t2``)
#: keeping no weights here and not coming back as archived when trained again.
PROXYFIT_CLEAN_TRAINING: Final = 3
#: The ``proxyfit`` table's claims: the labelled owner's defaults (C1 ``dither`` margin
#: 0.01 ``mixture-graded``, C3 ``dither``) and C3 with the training family, K = 32.
PROXYFIT_AUDITS: Final = (*LABELLED_DEFAULT_AUDITS, *FAMILY_AUDITS)


def plan_proxyfit(seeds: Sequence[int]) -> Plan:
    """Plan rung (a) with the proxy of the owner's own items trained until it fits them.

    ``pgdownfit``: the ladder's ``pgdown`` marks made on a proxy that stops training once
    it fits her 200 items (issue #39 part 3), with the ladder's claims that matter for
    the comparison; the ladder's ``pgdown`` rows (every step) are the other side. Clean
    models: :data:`PROXYFIT_CLEAN_TRAINING`, with the defaults under 20 fresh publication
    bits each.
    """
    plan = Plan(
        "proxyfit",
        "Regime ladder (a): the proxy of the owner's own items trained until it fits them "
        "(`pgdownfit`)",
    )
    for seed in seeds:
        plan.add(ModelSpec(seed, epsilon=CLI_EPSILON, marker=OWN_FIT_PROXY_MARKER), PROXYFIT_AUDITS)
        plan.add(
            ModelSpec(seed, fraction=0.0, training=PROXYFIT_CLEAN_TRAINING),
            [*PROXYFIT_AUDITS, *_null_audits(audits=LABELLED_DEFAULT_AUDITS)],
            epsilon=CLI_EPSILON,
            marker=OWN_FIT_PROXY_MARKER,
        )
    return plan


#: The ``proxylarge`` table's practitioner: the demo's CNN and recipe on M = 40,000 images,
#: half of them the owner's (20,000 items, where the proxy's schedule gets the epoch
#: floor: 40 epochs, 6,280 steps, against 21 epochs, 3,297 steps, before it), trained
#: 20 epochs: 800,000 images seen, about what rung (a)'s 500 epochs of 2,000 are.
PROXYLARGE_N_TRAIN: Final = 40_000
PROXYLARGE_OWNER_PERCENT: Final = 50
PROXYLARGE_EPOCHS: Final = 20
#: The ``proxylarge`` table's marks: the schedule ``owner mark`` trains now, and before.
PROXYLARGE_MARKERS: Final = (OWN_FIT_PROXY_MARKER, OWN_FIT_STEPS_MARKER)
#: Fresh publication bits per clean model there: none. A claim on a clean model opens all
#: 20,000 pairs, eight minutes for C1 on the 2-core CPU beside other work, so the false
#: detections are the clean models' claims with both vaults of their seed (four each).
PROXYLARGE_NULL_DRAWS: Final = 0


def plan_proxylarge(seeds: Sequence[int]) -> Plan:
    """Plan the labelled owner's default marks for a collection of 20,000 items.

    Issue #39 part 3 made the proxy of her own items train at least 40 epochs, which
    changes its schedule only above 10,368 items: no other table's owner has that many.
    Here she has 20,000 (:data:`PROXYLARGE_N_TRAIN`, :data:`PROXYLARGE_OWNER_PERCENT`),
    marked on the proxy ``owner mark`` trains now (``pgdownfit``) and on the one it trained
    before the floor (``pgdownfitsteps``); each seed's two used models and one clean model
    are the demo's recipe trained :data:`PROXYLARGE_EPOCHS` epochs, audited with the
    labelled owner's default claims, the clean one with both vaults (and under
    :data:`PROXYLARGE_NULL_DRAWS` fresh publication bits each).
    """
    return _plan_large_owner(
        seeds,
        "proxylarge",
        "An owner of 20,000 items: the proxy's schedule with and without the epoch floor "
        "(`pgdownfit`, `pgdownfitsteps`)",
        RECIPE,
    )


#: The ``proxylarge-noaug`` table's practitioner trains without augmentation: the
#: ``proxylarge`` table's models (pad-crop-flip) did not memorise her items (train
#: accuracy 0.894-0.906, test 0.900-0.919), so q-hat was 0.5 whichever proxy marked them.
PROXYLARGE_NOAUG_RECIPE: Final = "none"


def plan_proxylarge_noaug(seeds: Sequence[int]) -> Plan:
    """Plan :func:`plan_proxylarge`'s comparison with a practitioner who memorises.

    The same vaults (her 20,000 items on both proxy schedules), splits and claims; the
    practitioner's models are the demo's CNN trained :data:`PROXYLARGE_EPOCHS` epochs
    without augmentation (:data:`PROXYLARGE_NOAUG_RECIPE`), which fits its training set.
    """
    return _plan_large_owner(
        seeds,
        "proxylarge-noaug",
        "An owner of 20,000 items and a practitioner who memorises (no augmentation): "
        "the proxy's schedule with and without the epoch floor",
        PROXYLARGE_NOAUG_RECIPE,
    )


def _plan_large_owner(seeds: Sequence[int], table: str, title: str, recipe: str) -> Plan:
    """Plan the 20,000-item owner's two vaults against models trained with ``recipe``."""
    plan = Plan(table, title)
    base = ModelSpec(
        0,
        epsilon=CLI_EPSILON,
        n_train=PROXYLARGE_N_TRAIN,
        epochs=PROXYLARGE_EPOCHS,
        recipe=recipe,
        owner_percent=PROXYLARGE_OWNER_PERCENT,
    )
    nulls = _null_audits(PROXYLARGE_NULL_DRAWS, audits=LABELLED_DEFAULT_AUDITS)
    for seed in seeds:
        for marker in PROXYLARGE_MARKERS:
            plan.add(replace(base, seed=seed, marker=marker), LABELLED_DEFAULT_AUDITS)
        clean = replace(base, seed=seed, fraction=0.0)
        for marker in PROXYLARGE_MARKERS:
            audits = [*LABELLED_DEFAULT_AUDITS, *(nulls if marker == PROXYLARGE_MARKERS[0] else [])]
            plan.add(clean, audits, epsilon=CLI_EPSILON, marker=marker)
    return plan


#: The photo rung's marks (issue #39, part 7; :mod:`evaluation.photos`): ``owner mark``'s
#: default with labels on the owner's photos of a megapixel, neutral (the default) and
#: with ``--no-neutral-mark``. The names are :mod:`evaluation.photos`' markers.
PHOTO_MARKERS: Final = ("photoown", "photoownfree", "photoownjpeg", "photoownjpeglow")
#: The photo rung trained as rung (b): the marks without the JPEG publication row.
PHOTO_STANDARD_MARKERS: Final = PHOTO_MARKERS[:2]
#: The photo rung's clean models (trained without her photos) are the demo's regime's
#: third training (``-t2``): the ladder's clean models (``-t1``), trained again on this
#: CPU on 2026-11-28, did not come back as archived (seed 0: train 0.997 and test 0.874,
#: archived 0.995 and 0.871), so they are models of their own under a name of their own.
PHOTO_CLEAN_TRAINING: Final = 2


def plan_photo(seeds: Sequence[int]) -> Plan:
    """Plan the photo rung trained as rung (a): the owner's items are photos of 1 MP.

    Per seed, a used model for each of :data:`PHOTO_MARKERS` (the demo's regime, her 200
    photos resized by the practitioner among 1,800 images of 28 px) and a clean model
    (:data:`PHOTO_CLEAN_TRAINING`), all audited with the labelled owner's default claims against
    each photo vault, the model resizing every query itself.
    """
    plan = Plan(
        "photo",
        "Photo rung, trained as rung (a): the owner's items are photos of 1 MP",
    )
    for seed in seeds:
        for marker in PHOTO_MARKERS:
            plan.add(ModelSpec(seed, epsilon=CLI_EPSILON, marker=marker), LABELLED_DEFAULT_AUDITS)
        clean = ModelSpec(seed, fraction=0.0, training=PHOTO_CLEAN_TRAINING)
        for marker in PHOTO_MARKERS:
            plan.add(clean, LABELLED_DEFAULT_AUDITS, epsilon=CLI_EPSILON, marker=marker)
    return plan


def plan_photo_standard(seeds: Sequence[int]) -> Plan:
    """Plan the photo rung trained as rung (b): the ResNet, 80 epochs, her 1,000 photos.

    The same marks and claims as :func:`plan_photo`, the claims reaching the model
    through the arbiter's fit (:func:`evaluation.photos.fits_at_arbiter`); the clean
    models are the ``standard`` table's trained again (:data:`PHOTO_STANDARD_CLEAN_TRAINING`).
    21-41 minutes a model on the 2-core CPU; ``--device cuda`` on a lent accelerator.
    """
    plan = Plan(
        "photo-standard",
        "Photo rung, trained as rung (b): the owner's items are photos of 1 MP",
    )
    for seed in seeds:
        sizes = _rung_b_sizes(seed, STANDARD_EPOCHS)
        for marker in PHOTO_STANDARD_MARKERS:
            plan.add(replace(sizes, marker=marker), LABELLED_DEFAULT_AUDITS)
        clean = replace(sizes, fraction=0.0, training=PHOTO_STANDARD_CLEAN_TRAINING)
        for marker in PHOTO_STANDARD_MARKERS:
            plan.add(clean, LABELLED_DEFAULT_AUDITS, epsilon=CLI_EPSILON, marker=marker)
    return plan


#: Rung (b)'s photo table's clean models are the ``standard`` table's trained a second
#: time (``-t1``): the archive keeps their summaries, not their weights, and trained
#: again on a CPU they are other models (as the ladder's were), so under a name of their own.
PHOTO_STANDARD_CLEAN_TRAINING: Final = 1


#: Rung (b) of the ladder: the training-set size, epochs and trainer of an ordinary
#: practitioner (:mod:`evaluation.standard`), trained to convergence.
STANDARD_N_TRAIN: Final = 10_000
STANDARD_EPOCHS: Final = 80
STANDARD_TRAINER: Final = "resnet-sgd"


def standard_markers(seed: int) -> tuple[str, ...]:
    """Return the marks rung (b) trains on in experiment ``seed``.

    EfficientNet's and the public proxy's in seed 0; from seed 1 only the public
    proxy's (``pgdproxy``): EfficientNet's marks detected 0 of 5 at rung (a) and 0 of
    1 here, and a model of this rung is 21–41 minutes on the 2-core CPU. The marks of
    the proxy of the owner's own items have their own table (:func:`plan_standard_own`).
    """
    return (CLI_MARKER, PROXY_MARKER) if seed == 0 else (PROXY_MARKER,)


def plan_standard_own(seeds: Sequence[int]) -> Plan:
    """Plan rung (b) at 80 epochs on the marks ``owner mark`` makes with labels (``pgdown``).

    The proxy is trained on the owner's own 1,000 items; the practitioner is rung (b)'s
    ResNet. Clean models: the ``standard`` table's (the same split and recipe without
    her items), one per seed, audited with this table's vaults.
    """
    return _standard_plan(
        seeds,
        "standard-own",
        "Regime ladder (b): the CLI's default marks with labels (`pgdown`), 80 epochs",
        STANDARD_EPOCHS,
        markers=lambda _: (OWN_PROXY_MARKER,),
    )


def plan_standard_clusters(seeds: Sequence[int]) -> Plan:
    """Plan rung (b) at 80 epochs on the unlabelled owner's marks (``pgdclusters``).

    The proxy learns the clusters of the owner's own 1,000 items; the practitioner is
    rung (b)'s ResNet. Clean models: the ``standard`` table's, audited with this table's
    vaults on the vault's own publication bits, and with the claim an owner without
    labels files by default (``UNLABELLED_DEFAULT_AUDITS``) under 20 fresh draws each
    (a C4 claim at K = 32 over a clean model's 1,000 pairs took 12–33 s on the 2-core
    CPU).
    """
    plan = Plan(
        "standard-clusters",
        "Regime ladder (b): the unlabelled owner's marks (`pgdclusters`), 80 epochs",
    )
    audits = [*UNLABELLED_AUDITS, *LABELLED_DEFAULT_AUDITS]
    for seed in seeds:
        _add_rung_b(
            plan,
            seed,
            epochs=STANDARD_EPOCHS,
            marker=CLUSTERS_PROXY_MARKER,
            audits=audits,
            clean_audits=[*audits, *_null_audits(audits=UNLABELLED_DEFAULT_AUDITS)],
        )
    return plan


def _rung_b_sizes(seed: int, epochs: int) -> ModelSpec:
    """Return rung (b)'s model of experiment ``seed`` trained ``epochs`` (marks unset)."""
    return ModelSpec(
        seed,
        epsilon=CLI_EPSILON,
        n_train=STANDARD_N_TRAIN,
        epochs=epochs,
        trainer=STANDARD_TRAINER,
    )


def _add_rung_b(
    plan: Plan,
    seed: int,
    *,
    epochs: int,
    marker: str,
    audits: Sequence[AuditSpec],
    clean_audits: Sequence[AuditSpec],
    clean_training: int = 0,
) -> None:
    """Add rung (b)'s model on ``marker``'s marks and its clean model, with their claims.

    The clean model (its ``clean_training``-th training) is audited against the used
    model's vault.
    """
    used = replace(_rung_b_sizes(seed, epochs), marker=marker)
    plan.add(used, audits)
    clean = replace(used, fraction=0.0, training=clean_training)
    plan.add(clean, clean_audits, epsilon=CLI_EPSILON, marker=marker)


def plan_standard(seeds: Sequence[int]) -> Plan:
    """Plan the ladder's rung (b): a small ResNet trained with SGD on M = 10,000 images.

    The owner's 10% (N = 1,000) carries ε = 10 marks (:func:`standard_markers`), each
    kind with its own used models; the clean models train on the same split with other
    images in their place and are audited with the same vaults.
    """
    return _standard_plan(
        seeds, "standard", "Regime ladder (b): a ResNet trained the ordinary way", STANDARD_EPOCHS
    )


#: Rung (b) trained to convergence: epochs that take the small ResNet past 99% train
#: accuracy (120 gave 98.6%, ``python -m evaluation.convergence``).
CONVERGED_EPOCHS: Final = 200


def plan_converged(seeds: Sequence[int]) -> Plan:
    """Plan rung (b) trained to convergence (:data:`CONVERGED_EPOCHS`), the proxy's marks.

    The CLI's own marks are left out: they detected 0 of 5 at rung (a) and 0 of 1 at
    rung (b) in 80 epochs.
    """
    return _standard_plan(
        seeds,
        "converged",
        f"Regime ladder (b) trained to convergence: the same ResNet, {CONVERGED_EPOCHS} epochs",
        CONVERGED_EPOCHS,
        markers=lambda _: (PROXY_MARKER,),
    )


#: Fresh publication bits per clean model at rung (b) trained to convergence with the
#: default marks, for each of the labelled owner's default claims.
CONVERGED_OWN_NULL_DRAWS: Final = 20


def plan_converged_own(seeds: Sequence[int]) -> Plan:
    """Plan rung (b) trained to convergence on the marks ``owner mark`` makes with labels.

    The issue's target for rung (b) is the CLI's defaults on a model past 99% train
    accuracy: the ``pgdown`` marks (vaults of the ``standard-own`` table) in the ResNet of
    :func:`plan_converged`, with the ladder's claims. Clean models: the converged clean
    model trained a second time (``-t1``: the ``converged`` table's were trained on a lent
    accelerator and keep no weights here), audited with this table's vaults, and with the
    labelled owner's default claims (``LABELLED_DEFAULT_AUDITS``) under
    :data:`CONVERGED_OWN_NULL_DRAWS` fresh publication bits each.
    """
    plan = Plan(
        "converged-own",
        "Regime ladder (b) trained to convergence: the CLI's default marks with labels "
        f"(`pgdown`), {CONVERGED_EPOCHS} epochs",
    )
    audits = _ladder_audits()
    nulls = _null_audits(CONVERGED_OWN_NULL_DRAWS, audits=LABELLED_DEFAULT_AUDITS)
    for seed in seeds:
        _add_rung_b(
            plan,
            seed,
            epochs=CONVERGED_EPOCHS,
            marker=OWN_PROXY_MARKER,
            audits=audits,
            clean_audits=[*audits, *nulls],
            clean_training=1,
        )
    return plan


#: Rung (c), the paper's scale: M as large as Fashion-MNIST's 60,000 training images
#: allow with the owner's 10% and as many stand-ins for the clean models (60,000 · 10/11
#: rounded down to thousands; the paper's CIFAR-10 set has 50,000), ResNet-18, 80 epochs.
SCALE_N_TRAIN: Final = 54_000
SCALE_EPOCHS: Final = 80
SCALE_TRAINER: Final = "resnet18-sgd"
#: Seeds whose clean model rung (c) trains (a lent accelerator's 30 minutes hold five
#: used models and two clean ones).
SCALE_CLEAN_SEEDS: Final = (0, 1)
#: Fresh publication bits per clean model at rung (c) (each claim there exhausts 5,400
#: pairs on a clean model).
SCALE_NULL_DRAWS: Final = 5
#: Claims at rung (c): the CLI's default, and the training family at K = 32.
SCALE_AUDITS: Final = (
    *CLI_AUDITS,
    AuditSpec(knowledge="C1"),
    AuditSpec(knowledge="C3"),
)


def _scale_sizes(seed: int, marker: str) -> ModelSpec:
    """Return rung (c)'s model of experiment ``seed`` on ``marker``'s ε = 10 marks.

    Rung (b)'s recipe on ResNet-18 and 54,000 images (:data:`SCALE_TRAINER`).
    """
    sizes = _rung_b_sizes(seed, SCALE_EPOCHS)
    return replace(sizes, n_train=SCALE_N_TRAIN, trainer=SCALE_TRAINER, marker=marker)


def plan_scale(seeds: Sequence[int]) -> Plan:
    """Plan the ladder's rung (c): ResNet-18 on M = 54,000 images, the proxy's ε = 10 marks.

    Clean models only for the seeds of :data:`SCALE_CLEAN_SEEDS`, audited with the
    default claim under fresh publication bits as well.
    """
    plan = Plan("scale", "Regime ladder (c): the paper's scale, ResNet-18 on 54,000 images")
    for seed in seeds:
        sizes = _scale_sizes(seed, PROXY_MARKER)
        plan.add(sizes, list(SCALE_AUDITS))
        if seed in SCALE_CLEAN_SEEDS:
            plan.add(
                replace(sizes, fraction=0.0),
                [*SCALE_AUDITS, *_null_audits(SCALE_NULL_DRAWS)],
                epsilon=CLI_EPSILON,
                marker=PROXY_MARKER,
            )
    return plan


#: Claims at rung (c) on the default marks with labels: the labelled owner's defaults, the
#: C1 default before the margin, C2 at the margin, the training family in C3, and the
#: unlabelled owner's default.
SCALE_OWN_AUDITS: Final = (
    *LABELLED_DEFAULT_AUDITS,
    CLI_AUDITS[0],
    GRADED_AUDITS[1],
    AuditSpec(knowledge="C3"),
    *UNLABELLED_DEFAULT_AUDITS,
)


def plan_scale_own(seeds: Sequence[int]) -> Plan:
    """Plan rung (c) on the marks ``owner mark`` makes with labels (``pgdown``).

    :func:`plan_scale`'s ResNet-18, data and recipe, with the owner's proxy trained on
    her own 5,400 labelled items, and :data:`SCALE_OWN_AUDITS`. Every seed has its clean
    model, trained as a second training (``-t1``: the ``scale`` table's clean models keep
    no weights), audited with the seed's vault and with the labelled defaults under
    :data:`SCALE_NULL_DRAWS` fresh publication bits. A seed is two ResNet-18 trainings:
    run it a seed or two at a time (``--seeds``) where a lent accelerator's time is short.
    """
    plan = Plan(
        "scale-own",
        "Regime ladder (c): the paper's scale on the CLI's default marks with labels (`pgdown`)",
    )
    nulls = _null_audits(SCALE_NULL_DRAWS, audits=LABELLED_DEFAULT_AUDITS)
    for seed in seeds:
        used = _scale_sizes(seed, OWN_PROXY_MARKER)
        plan.add(used, list(SCALE_OWN_AUDITS))
        plan.add(
            replace(used, fraction=0.0, training=1),
            [*SCALE_OWN_AUDITS, *nulls],
            epsilon=CLI_EPSILON,
            marker=OWN_PROXY_MARKER,
        )
    return plan


def _standard_plan(
    seeds: Sequence[int],
    table: str,
    title: str,
    epochs: int,
    *,
    markers: Callable[[int], tuple[str, ...]] = standard_markers,
) -> Plan:
    """Return rung (b)'s plan: per seed, a used model per kind of marks and a clean one."""
    plan = Plan(table, title)
    audits = _ladder_audits()
    for seed in seeds:
        sizes = _rung_b_sizes(seed, epochs)
        for marker in markers(seed):
            plan.add(replace(sizes, marker=marker), audits)
        clean = replace(sizes, fraction=0.0)
        for marker in markers(seed):
            plan.add(clean, _clean_audits(), epsilon=CLI_EPSILON, marker=marker)
    return plan


#: Fresh arbiter randomness per clean model in the ``null`` table.
NULL_DRAWS: Final = 40


def plan_null(seeds: Sequence[int]) -> Plan:
    """Plan false detections: clean models audited under many fresh publication bits."""
    plan = Plan("null", "False detections under fresh publication bits (clean models)")
    audits = [
        AuditSpec(knowledge=c, k=8, rho_draw=d)
        for c in ("C1", "C3")
        for d in range(1, NULL_DRAWS + 1)
    ]
    for seed in seeds:
        plan.add(ModelSpec(seed, fraction=0.0), audits)
    return plan


#: The attacks table (issue #25, the paper's table ``classifier:robustness``): rung (a)
#: with the CLI's default marks with labels (``pgdown``, ε = 10). DP-SGD's noise
#: multipliers σ (the paper's σ are absolute noise levels of its own code, not these).
ATTACK_DP_SIGMAS: Final = (0.1, 0.3, 1.0)
#: Early stopping: the epochs of 500 trained (the paper's 20, 40, 60 of 80 epochs).
ATTACK_EPOCHS: Final = (125, 250, 375)
#: Gaussian noise on the training images, σ in levels of 255 (the paper's).
ATTACK_NOISE: Final = (10, 20, 30)
#: Seeds whose training-time attacks are also trained without the owner's data (their
#: false detections): one, to keep the table a CPU's night.
ATTACK_CLEAN_SEEDS: Final = (0,)
#: The claims of the attacks table: the CLI's default in C1–C3 (K = 1 ``dither``, margin
#: 0.01 and the graded test with probabilities), and the training family at K = 32 in
#: C4 (one label per version ties every pair at K = 1: the verifier refuses it), C1 and C3.
ATTACK_AUDITS: Final = (
    AuditSpec(knowledge="C1", k=1, perturbation="dither", margin=0.01, test="mixture-graded"),
    AuditSpec(knowledge="C2", k=1, perturbation="dither", margin=0.01, test="mixture-graded"),
    AuditSpec(knowledge="C3", k=1, perturbation="dither"),
    AuditSpec(knowledge="C4"),
    AuditSpec(knowledge="C1"),
    AuditSpec(knowledge="C3"),
)
#: Label-only claims with ``noise`` copies (spec §10.3), K = 32: for a model that fits its
#: training images exactly, where C3 and C4 with one ``dither`` copy or the training
#: family tie or find nothing. Claimed on the ``noaug`` row only (used models of every
#: seed, and its clean model under the vault's bits and :data:`NOISE_NULL_DRAWS` fresh
#: ones); elsewhere the ablation scores the family (:data:`evaluation.ablation.VARIANTS`).
NOISE_AUDITS: Final = (
    AuditSpec(knowledge="C3", perturbation="noise"),
    AuditSpec(knowledge="C4", perturbation="noise"),
)
#: Fresh publication bits under which the ``noise`` claims run on the ``noaug`` clean model.
NOISE_NULL_DRAWS: Final = 50
#: Output defences (:mod:`twinaudit.practitioner.defences`) around the unattacked models; the
#: probability maskings leave labels as they are, so they are audited in C1 and C2 only.
ATTACK_DEFENCES: Final = ("topk:1", "topk:3", "memguard", "pairdetect", "pairdetect-features")
PROBABILITY_DEFENCES: Final = ("topk", "memguard")


def attack_models(seed: int, clean: bool = False) -> list[tuple[str, ModelSpec]]:
    """Return the training-time attack rows of experiment ``seed``: (row name, model)."""
    base = ModelSpec(seed, epsilon=CLI_EPSILON, marker=OWN_PROXY_MARKER)
    if clean:
        base = replace(base, fraction=0.0)
    return [
        *((f"dp{s:g}", replace(base, attack=f"dp{s:g}")) for s in ATTACK_DP_SIGMAS),
        *((f"es{e}", replace(base, epochs=e)) for e in ATTACK_EPOCHS),
        ("advreg", replace(base, attack="advreg")),
        ("noaug", replace(base, recipe="none")),
        *((f"gauss{n}", replace(base, attack=f"gauss{n}")) for n in ATTACK_NOISE),
        ("markperturb", replace(base, attack="markperturb")),
    ]


def attack_rows() -> tuple[str, ...]:
    """Return the names of the training-time attack rows (``noaug``, ``dp0.1``, …)."""
    return tuple(row for row, _ in attack_models(0))


def only_attack_rows(plan: Plan, rows: Sequence[str], seeds: Sequence[int]) -> Plan:
    """Return ``plan`` (the attacks table's) without the training-time rows not in ``rows``.

    The unattacked models and their output defences stay; a row's models are its used
    model of every seed and, in :data:`ATTACK_CLEAN_SEEDS`, its clean one.

    Raises:
        ValueError: a name that is not a training-time row.

    """
    unknown = sorted(set(rows) - set(attack_rows()))
    if unknown:
        raise ValueError(f"no training-time attack row {', '.join(unknown)}; rows: {attack_rows()}")
    dropped = {
        model
        for seed in seeds
        for clean in (False, True)
        for row, model in attack_models(seed, clean=clean)
        if row not in rows
    }
    kept = Plan(plan.table, plan.title)
    kept.models = [m for m in plan.models if m not in dropped]
    kept.jobs = [j for j in plan.jobs if j.model not in dropped]
    return kept


def only_photo_marks(plan: Plan, marks: Sequence[str]) -> Plan:
    """Return ``plan`` (a photo rung's) without the marks of its vaults not in ``marks``.

    A used model trained on a dropped mark goes, and so do the clean models' claims
    against a dropped mark's vault; a clean model stays while a kept mark's claims need it.

    Raises:
        ValueError: a name that is not one of the plan's marks.

    """
    known = list(dict.fromkeys(j.vault.marker for j in plan.jobs))
    unknown = sorted(set(marks) - set(known))
    if unknown:
        raise ValueError(f"no photo mark {', '.join(unknown)}; marks: {', '.join(known)}")
    kept = Plan(plan.table, plan.title)
    kept.jobs = [j for j in plan.jobs if j.vault.marker in marks]
    needed = {j.model for j in kept.jobs}
    kept.models = [m for m in plan.models if m in needed]
    return kept


def only_used_models(plan: Plan) -> Plan:
    """Return ``plan`` (a photo rung's) without its clean models and their claims.

    For a run whose clean models are on record under a name it cannot train again as
    they were (a CPU's training differs from machine to machine, and the archive keeps
    summaries, not weights): its used models' claims are new, and no second model is
    recorded under a clean model's name.
    """
    kept = Plan(plan.table, plan.title)
    kept.jobs = [j for j in plan.jobs if not j.model.clean]
    kept.models = [m for m in plan.models if not m.clean]
    return kept


def defence_audits(defence: str) -> list[AuditSpec]:
    """Return the attacks table's claims through ``defence`` (see :data:`ATTACK_DEFENCES`)."""
    name = defence.partition(":")[0]
    audits = [replace(a, defence=defence) for a in ATTACK_AUDITS]
    if name in PROBABILITY_DEFENCES:
        return [a for a in audits if a.knowledge in ("C1", "C2")]
    return audits


def _add_used_and_clean(plan: Plan, seed: int, audits: Sequence[AuditSpec]) -> None:
    """Add rung (a)'s ``pgdown`` model of ``seed`` and its clean model ``-t1``.

    Both are audited with ``audits``, the clean one with the same vault.
    """
    plan.add(ModelSpec(seed, epsilon=CLI_EPSILON, marker=OWN_PROXY_MARKER), audits)
    plan.add(
        ModelSpec(seed, fraction=0.0, training=1),
        audits,
        epsilon=CLI_EPSILON,
        marker=OWN_PROXY_MARKER,
    )


def plan_attacks(seeds: Sequence[int]) -> Plan:
    """Plan the adaptive attacks at rung (a) with ``pgdown`` marks (issue #25).

    Per seed: the ladder's used model (no attack) and its clean model (``-t1``), both
    audited with :data:`ATTACK_AUDITS` as they are and through each output defence;
    a used model per training-time attack (:func:`attack_models`), and for
    :data:`ATTACK_CLEAN_SEEDS` the same attacks without the owner's data.
    """
    plan = Plan("attacks", "Adaptive attacks (the paper's table `classifier:robustness`)")
    audits = [*ATTACK_AUDITS, *(a for d in ATTACK_DEFENCES for a in defence_audits(d))]
    for seed in seeds:
        _add_used_and_clean(plan, seed, audits)
        for row, model in attack_models(seed):
            plan.add(model, [*ATTACK_AUDITS, *(NOISE_AUDITS if row == "noaug" else ())])
        if seed in ATTACK_CLEAN_SEEDS:
            for row, model in attack_models(seed, clean=True):
                noise = (
                    [*NOISE_AUDITS, *_null_audits(NOISE_NULL_DRAWS, NOISE_AUDITS)]
                    if row == "noaug"
                    else []
                )
                plan.add(
                    model, [*ATTACK_AUDITS, *noise], epsilon=CLI_EPSILON, marker=OWN_PROXY_MARKER
                )
    return plan


#: The baselines table (issue #25, the paper's table ``classifier:baselines``): rung (a)
#: with the owner's 10% marked by each baseline (:mod:`evaluation.baselines`); our
#: method's row is the ladder's ``pgdown`` model and its clean model with the attacks
#: table's claims (the same results).
BASELINE_AUDITS: Final = ATTACK_AUDITS
#: The several-owners table (the paper's ``classifier:multiple_users``): owners per
#: training set, each 10% of it, and the most owners an experiment has.
OWNER_COUNTS: Final = (1, 2, 5, 10)
MAX_OWNERS: Final = 10
#: Each owner's claims: the CLI's default in C1 (margin 0.01) and C3, and the paper's
#: column, C4 with the training family at K = 32.
OWNER_AUDITS: Final = (ATTACK_AUDITS[0], ATTACK_AUDITS[2], ATTACK_AUDITS[3])


def plan_baselines(seeds: Sequence[int]) -> Plan:
    """Plan the baselines beside ours at rung (a) (issue #25 item 2).

    The plan holds our side (the ladder's ``pgdown`` model and clean model ``-t1``, the
    attacks table's claims); the baselines' models and tests are
    :func:`evaluation.baselines.run_baselines`'s.
    """
    plan = Plan(
        "baselines", "Baselines: RData and UBW-C (the paper's table `classifier:baselines`)"
    )
    for seed in seeds:
        _add_used_and_clean(plan, seed, BASELINE_AUDITS)
    return plan


def plan_owners(seeds: Sequence[int]) -> Plan:
    """Plan several owners auditing one model (issue #25 item 3).

    The plan holds owner 0 of k = 1 (the ladder's ``pgdown`` model and her claims);
    the other owners, the k ≥ 2 models and RData beside them are
    :func:`evaluation.baselines.run_owners`'s.
    """
    plan = Plan("owners", "Several owners (the paper's table `classifier:multiple_users`)")
    for seed in seeds:
        plan.add(ModelSpec(seed, epsilon=CLI_EPSILON, marker=OWN_PROXY_MARKER), OWNER_AUDITS)
    return plan


#: The unlearning table (issue #25 item 4): the claims filed before and after the
#: practitioner unlearns, the CLI's default claim for a labelled vault (C3, K = 1
#: ``dither``) and C1 on the same queries with the probability defaults (margin 0.01,
#: the graded test): the attacks table's.
UNLEARNING_AUDITS: Final = (ATTACK_AUDITS[2], ATTACK_AUDITS[0])


def plan_unlearning(seeds: Sequence[int]) -> Plan:
    """Plan auditing again after unlearning (issue #25 item 4), at rung (a) with ``pgdown``.

    The plan holds claim 1 of each experiment: :data:`UNLEARNING_AUDITS` against the
    ladder's used model, and against its clean model ``-t1`` (false detections; the
    same model is the "exact retraining" state). The unlearned models and the claims
    on fresh pairs after are :func:`evaluation.unlearning.run_unlearning`'s.
    """
    plan = Plan(
        "unlearning",
        "Auditing again after unlearning (the paper's `discussion:machine_unlearning`)",
    )
    for seed in seeds:
        _add_used_and_clean(plan, seed, UNLEARNING_AUDITS)
    return plan


PLANNERS: Final = {
    "main": plan_main,
    "null": plan_null,
    "recipe": plan_recipe,
    "k": plan_k,
    "epsilon": plan_epsilon,
    "fraction": plan_fraction,
    "ladder": plan_ladder,
    "unlabelled": plan_unlabelled,
    "standard": plan_standard,
    "standard-own": plan_standard_own,
    "standard-clusters": plan_standard_clusters,
    "converged": plan_converged,
    "converged-own": plan_converged_own,
    "scale": plan_scale,
    "scale-own": plan_scale_own,
    "attacks": plan_attacks,
    "baselines": plan_baselines,
    "owners": plan_owners,
    "unlearning": plan_unlearning,
    "photo": plan_photo,
    "photo-standard": plan_photo_standard,
    "proxyfit": plan_proxyfit,
    "proxylarge": plan_proxylarge,
    "proxylarge-noaug": plan_proxylarge_noaug,
}


def with_sizes(plan: Plan, *, n_train: int, epochs: int) -> Plan:
    """Return ``plan`` with every model's training-set size and epochs replaced (smoke runs).

    The plan's first model gets ``epochs``; a model that trains for another number of
    epochs (the attacks table's early stopping) gets as many in proportion (at least 1).
    """
    first = plan.models[0].epochs

    def scaled(model: ModelSpec) -> int:
        return epochs if model.epochs == first else max(1, round(model.epochs * epochs / first))

    models = [replace(m, n_train=n_train, epochs=scaled(m)) for m in plan.models]
    jobs = [
        Job(
            replace(j.model, n_train=n_train, epochs=scaled(j.model)),
            replace(j.vault, n_train=n_train),
            j.audit,
        )
        for j in plan.jobs
    ]
    return Plan(plan.table, plan.title, models, jobs)
