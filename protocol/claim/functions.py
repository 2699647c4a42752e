"""The table of score functions (spec §10.1, §10.3–§10.6, §12): one record per function.

Each :class:`ScoreFunction` says everything about a score function that does not need
the model or numpy's image code: its claim name, the item kind it reads, the oracle
capability it needs, its parameters with their defaults and choices, the type of its
claim parameters (its score spec) and the keys it adds to a transcript's pair records.
Everything else is built from :data:`SCORE_FUNCTIONS`: parsing a claim's score map or
the ``ScoreSpec`` message (:func:`score_spec_from_value`, :func:`score_request_from_fields`),
the owner's defaults (``twinaudit.owner.claim_client``), the CLI's choices and help
(``twinaudit owner claim``), the HTML verdict report's wording, the functions
``verifier reexecute`` runs (those of image items) and the check of a pair record
(:mod:`.transcript`). The
verifier attaches each function's window logic to its name
(``twinaudit.verifier.windows.registry``); a function added here without one fails there at import.

==================  ===============  ================  =================  =============
function            item kind        oracle capability queries / version  parameters
==================  ===============  ================  =================  =============
image-classifier    image            classify          K                  k, perturbation,
                                                                          knowledge,
                                                                          statistic, margin
image-encoder       image            embed-images      K                  k, perturbation
language-model      text             token-logprobs    1                  —
image-text          captioned-image  embed-image-text  1                  —
==================  ===============  ================  =================  =============
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from twinaudit.protocol.errors import ParameterError

from .scores import classifier, encoder
from .scores.classifier import ScoreSpec
from .scores.encoder import EncoderSpec
from .scores.function_only import ImageTextSpec, LanguageSpec
from .scores.knowledge import KNOWLEDGE_CHOICES, KNOWLEDGE_WORDS, PendingScoreSpec
from .scores.oracle_view import OracleDescription
from .scores.perturbations import FAMILIES

#: Any score function's claim parameters.
AnyScoreSpec = ScoreSpec | EncoderSpec | LanguageSpec | ImageTextSpec
#: What a claim's score fields ask for: a score, or an image-classifier score whose
#: knowledge condition is a word the oracle's description settles (:func:`resolve_score`).
ScoreRequest = AnyScoreSpec | PendingScoreSpec
#: A parameter's value: the fields of the ``ScoreSpec`` message are integers, text, floats.
ParameterValue = int | str | float


@dataclass(frozen=True)
class Parameter:
    """One parameter of a score function, named as its claim-map key and message field.

    ``default`` is what a claim asks for when the owner names nothing. Where
    ``fills_unset`` is true the verifier also reads an unset message field (0, "") as
    ``default``; elsewhere an unset field is an invalid value. ``choices`` lists the
    values a text parameter may take (empty: any the spec accepts). ``chosen_default``
    is the owner's default where another of her choices calls for it, in place of
    ``default`` (the image-classifier's K for a family of copies that differ, its margin
    for a condition that reads probabilities with the entropy statistic;
    ``twinaudit.owner.claim_client.choose_score`` applies them); None where there is none.
    """

    name: str
    default: ParameterValue
    help: str
    choices: tuple[str, ...] = ()
    fills_unset: bool = False
    chosen_default: ParameterValue | None = None


@dataclass(frozen=True)
class ScoreFunction:
    """One score function: its name, what it reads, what it asks, what it takes."""

    name: str
    item_kind: str
    capability: str
    #: The function's claim parameters (its score spec), built from the parameters.
    spec_type: type[AnyScoreSpec]
    parameters: tuple[Parameter, ...]
    #: Keys each pair record of a transcript adds for this function (spec §12).
    record_keys: frozenset[str]
    #: What the function audits, in a few words (the CLI's help).
    summary: str
    #: How it scores a pair, in a sentence for a person reading a verdict (the HTML report).
    explanation: str
    #: Whether it is the score a claim on ``item_kind`` items names by default.
    default_for_kind: bool = False

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """The names of the parameters, in order."""
        return tuple(p.name for p in self.parameters)

    def parameter(self, name: str) -> Parameter:
        """Return the parameter called ``name`` (KeyError if the function has none)."""
        for parameter in self.parameters:
            if parameter.name == name:
                return parameter
        raise KeyError(name)

    def defaults(self) -> dict[str, ParameterValue]:
        """Return each parameter's default (what a claim asks for when nothing is named)."""
        return {p.name: p.default for p in self.parameters}

    def build(self, fields: Mapping[str, ParameterValue]) -> AnyScoreSpec:
        """Return the score spec of ``fields`` (one per parameter), unset ones filled.

        Raises ``ParameterError`` for a value outside the parameter's domain.
        """
        values = {
            p.name: p.default if p.fills_unset and not fields[p.name] else fields[p.name]
            for p in self.parameters
        }
        if "margin" in values:
            values["margin"] = float(values["margin"])
        make: Callable[..., AnyScoreSpec] = self.spec_type
        return make(**values)


_K_HELP = "perturbed copies per version"
_PERTURBATION_HELP = "the perturbation family of the copies"

#: The score functions, by claim name, in the order of spec §10.3–§10.6.
SCORE_FUNCTIONS: Final[Mapping[str, ScoreFunction]] = MappingProxyType(
    {
        f.name: f
        for f in (
            ScoreFunction(
                name=classifier.FUNCTION,
                item_kind=ScoreSpec.item_kind,
                capability=classifier.CAPABILITY,
                spec_type=ScoreSpec,
                parameters=(
                    # 32 copies for a family whose copies differ (a lone crop is noise):
                    # the K the regime ladder measured the families with.
                    Parameter("k", 1, _K_HELP, chosen_default=32),
                    Parameter("perturbation", "dither", _PERTURBATION_HELP, FAMILIES),
                    Parameter(
                        "knowledge",
                        "unlabelled",
                        "the knowledge condition, or a word the verifier resolves",
                        KNOWLEDGE_CHOICES,
                    ),
                    Parameter(
                        "statistic",
                        "entropy",
                        "how the copies' answers become a score",
                        classifier.STATISTICS,
                        fills_unset=True,
                    ),
                    # 0.01 where the condition reads probabilities with the entropy:
                    # twinaudit.owner.claim_client.DEFAULT_MARGIN says why this value.
                    Parameter(
                        "margin",
                        0.0,
                        "the tie margin (spec §7.1)",
                        fills_unset=True,
                        chosen_default=0.01,
                    ),
                ),
                record_keys=frozenset({"label", "shape", "params", "query_digests", "answers"}),
                summary="a classifier of images",
                explanation="an image classifier's answers: each version of a pair is sent "
                "as K copies, and the version the model is more confident about scores higher",
                default_for_kind=True,
            ),
            ScoreFunction(
                name=encoder.FUNCTION,
                item_kind=EncoderSpec.item_kind,
                capability=encoder.CAPABILITY,
                spec_type=EncoderSpec,
                parameters=(
                    Parameter("k", encoder.DEFAULT_K, _K_HELP, fills_unset=True),
                    Parameter(
                        "perturbation",
                        encoder.DEFAULT_PERTURBATION,
                        _PERTURBATION_HELP,
                        encoder.PERTURBING_FAMILIES,
                        fills_unset=True,
                    ),
                ),
                record_keys=frozenset({"shape", "params", "query_digests", "answers"}),
                summary="a self-supervised encoder of images",
                explanation="an image encoder's embeddings: each version is sent as K "
                "perturbed copies, and the version whose embeddings agree more with each "
                "other scores higher",
            ),
            ScoreFunction(
                name=LanguageSpec.FUNCTION,
                item_kind=LanguageSpec.item_kind,
                capability=LanguageSpec.CAPABILITY,
                spec_type=LanguageSpec,
                parameters=(),
                record_keys=frozenset({"answers"}),
                summary="a language model",
                explanation="a language model's token log-probabilities: the version of a "
                "text the model finds more likely (lower mean token loss) scores higher",
                default_for_kind=True,
            ),
            ScoreFunction(
                name=ImageTextSpec.FUNCTION,
                item_kind=ImageTextSpec.item_kind,
                capability=ImageTextSpec.CAPABILITY,
                spec_type=ImageTextSpec,
                parameters=(),
                record_keys=frozenset({"shape", "query_digests", "answers"}),
                summary="a CLIP-style model of images and captions",
                explanation="an image-text model: the version of an image whose embedding "
                "is closer to its caption's scores higher",
                default_for_kind=True,
            ),
        )
    }
)
#: The score functions' claim names.
FUNCTIONS: Final = tuple(SCORE_FUNCTIONS)
#: The score a claim names by default, by the item kind of its record.
DEFAULT_FUNCTION: Final[Mapping[str, str]] = MappingProxyType(
    {f.item_kind: f.name for f in SCORE_FUNCTIONS.values() if f.default_for_kind}
)
#: Every parameter a score function may take, in message order, with what an unset
#: one is called in the error that refuses it.
_PARAMETER_WORDS: Final = {
    "k": "k",
    "perturbation": "perturbation",
    "knowledge": "knowledge condition",
    "statistic": "statistic",
    "margin": "tie margin",
}


def score_function(name: object) -> ScoreFunction:
    """Return the table's record of ``name``; ``ParameterError`` for an unknown name."""
    if not isinstance(name, str) or name not in SCORE_FUNCTIONS:
        raise ParameterError(f"unknown score function {name!r}; known: {FUNCTIONS}")
    return SCORE_FUNCTIONS[name]


def score_spec_from_value(value: object) -> AnyScoreSpec:
    """Parse a claim's ``score`` map strictly, whichever function it names."""
    function = value.get("function") if isinstance(value, dict) else None
    return score_function(function).spec_type.from_value(value)


def score_spec_from_fields(
    function: str,
    k: int,
    perturbation: str,
    knowledge: str,
    statistic: str = "",
    *,
    margin: float = 0.0,
) -> AnyScoreSpec:
    """Build a score spec from the fields of the proto's ``ScoreSpec``.

    Fields a function does not take must be unset (0 or empty); an unset field of a
    parameter that :attr:`Parameter.fills_unset` takes its default (for ``image-encoder``
    K = 64 and ``random-resized-crop-flip-v2``; the classifier's statistic ``entropy``).
    """
    entry = score_function(function)
    fields: dict[str, ParameterValue] = {
        "k": k,
        "perturbation": perturbation,
        "knowledge": knowledge,
        "statistic": statistic,
        "margin": margin,
    }
    for name in ("statistic", "margin", "knowledge"):
        if name not in entry.parameter_names and fields[name]:
            raise ParameterError(f"the {function!r} score takes no {_PARAMETER_WORDS[name]}")
    untaken = [n for n in ("k", "perturbation") if n not in entry.parameter_names]
    if any(fields[n] for n in untaken):
        words = " and no ".join(_PARAMETER_WORDS[n] for n in untaken)
        raise ParameterError(f"the {function!r} score takes no {words}")
    return entry.build(fields)


def score_request_from_fields(
    function: str,
    k: int,
    perturbation: str,
    knowledge: str,
    statistic: str = "",
    *,
    margin: float = 0.0,
) -> ScoreRequest:
    """Like :func:`score_spec_from_fields`, but the classifier's ``knowledge`` may be a word.

    A word (``labelled``, ``unlabelled``; :mod:`.scores.knowledge`) gives a
    :class:`PendingScoreSpec`, every other field validated; anything that is neither a
    word nor C1–C4 is ``invalid-parameter``.
    """
    if function == classifier.FUNCTION and knowledge in KNOWLEDGE_WORDS:
        probabilities_condition = KNOWLEDGE_WORDS[knowledge][0]
        template = score_spec_from_fields(
            function, k, perturbation, probabilities_condition, statistic, margin=margin
        )
        assert isinstance(template, ScoreSpec)
        return PendingScoreSpec(knowledge, template)
    if function == classifier.FUNCTION and knowledge not in KNOWLEDGE_CHOICES:
        raise ParameterError(
            f"unknown knowledge condition {knowledge!r}; known: {KNOWLEDGE_CHOICES}"
        )
    return score_spec_from_fields(function, k, perturbation, knowledge, statistic, margin=margin)


def resolve_score(request: ScoreRequest, info: OracleDescription) -> AnyScoreSpec:
    """Return the score a claim's request names against an oracle described by ``info``."""
    return request.resolve(info) if isinstance(request, PendingScoreSpec) else request
