"""The owner's side of a claim: a bidirectional stream with the arbiter's verifier.

The owner starts the claim, then answers each :class:`OpeningRequest` with the
requested pairs, in the requested order, each with its salt, both versions and
its Merkle inclusion proof. The verifier streams progress and finally the signed
verdict. The owner never chooses which pairs are opened.
"""

from __future__ import annotations

import dataclasses
import queue
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol.claim.filing import NONCE_BYTES, sign_claim_request
from twinaudit.protocol.claim.filing import ClaimRequest as SignedRequest
from twinaudit.protocol.claim.functions import (
    DEFAULT_FUNCTION,
    SCORE_FUNCTIONS,
    ParameterValue,
    ScoreRequest,
    score_request_from_fields,
)
from twinaudit.protocol.claim.params import ClaimParams
from twinaudit.protocol.claim.scores.classifier import C4_ONE_COPY_RULE, LABELLED
from twinaudit.protocol.claim.scores.classifier import FUNCTION as CLASSIFIER
from twinaudit.protocol.claim.scores.knowledge import KNOWLEDGE_WORDS
from twinaudit.protocol.claim.scores.perturbations import SINGLE_COPY
from twinaudit.protocol.errors import InputError, ParameterError, TwinauditError
from twinaudit.protocol.keys import key_id, load_public_key_pem
from twinaudit.wire.claim_start import start_map, to_claim_start
from twinaudit.wire.openings import ReceivedPair, opening_messages
from twinaudit.wire.transport import CLAIM_DEADLINE_S
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc


@dataclass(frozen=True)
class Opening:
    """Everything needed to open pair ``index``."""

    index: int
    salt: bytes
    version0: bytes
    version1: bytes
    proof: list[bytes]


#: The score function a claim names unless the owner chooses one, by the vault's item kind
#: (the table of score functions, :data:`~twinaudit.protocol.claim.functions.DEFAULT_FUNCTION`).
DEFAULT_SCORE: Final[Mapping[str, str]] = DEFAULT_FUNCTION
#: The parameters each score function takes, with the owner's defaults (spec §10.3–10.6),
#: from the table of score functions: the image-encoder's K = 64 and
#: ``random-resized-crop-flip-v2`` are sent as they are. The classifier's knowledge defaults
#: to a word the verifier resolves from the oracle's description (spec §10.1):
#: ``unlabelled`` (C4) here, with :data:`UNLABELLED_FAMILY` from :func:`choose_score`,
#: and ``labelled`` (C3) for a labelled vault.
SCORE_PARAMETERS: Final[Mapping[str, Mapping[str, ParameterValue]]] = {
    name: function.defaults() for name, function in SCORE_FUNCTIONS.items()
}
#: The tie margin (spec §7.1) a claim asks for when its condition reads probabilities
#: (C1, C2) with the paper's entropy. 0.01, not the 0.1 that did best on the regime ladder's models
#: (``docs/results.md``, "Regime ladder", rows "margin" and the ablation's ``m=`` rows):
#: on a model nearly certain of both twins of most pairs, a small claim keeps too few
#: pairs at 0.1 (a 120-pair claim in the test suite kept 5 and could not decide, where
#: 0.01 kept 25, all won), and 0.01 still took C1 from q̂ 0.54–0.55 to 0.64–0.82 over all
#: pairs on every rung. The value is the table of score functions' (its ``chosen_default``).
DEFAULT_MARGIN: Final = float(SCORE_FUNCTIONS[CLASSIFIER].parameter("margin").chosen_default or 0.0)
#: Knowledge choices that read probability vectors where the oracle answers them.
MARGIN_CHOICES: Final = frozenset({"C1", "C2"})
#: Knowledge choices that score with the committed label (a word that resolves to one).
LABELLED_CHOICES: Final = frozenset(
    {*LABELLED, *(word for word, (c, _) in KNOWLEDGE_WORDS.items() if c in LABELLED)}
)


#: The image-classifier's K for a perturbation family whose copies differ (any but
#: :data:`~twinaudit.protocol.claim.scores.perturbations.SINGLE_COPY`, whose K is 1) asked for
#: without ``--k``: the K the regime ladder measured them with (``docs/results.md``,
#: "Regime ladder", ``pad-shift-flip`` K = 32), from the table of score functions.
FAMILY_K: Final = int(SCORE_FUNCTIONS[CLASSIFIER].parameter("k").chosen_default or 1)


#: The perturbation family of an unlabelled vault's default claim, at :data:`FAMILY_K`
#: copies. Without committed labels the recommended condition is C4 (the word
#: ``unlabelled``, spec §10.1), which one copy per version cannot decide (one label
#: scores every version alike), so the claim asks for copies that differ: the training
#: family's shifts and flips, each copy then dithered, so that no copy is the published
#: file or one of its placements, which a host can list (``docs/results.md``, the
#: evasion table: its ``exact`` host defeated every plain ``pad-shift-flip`` claim and
#: recognised no dithered copy). C4 so asked detected where C2 with one ``dither`` copy
#: did not (``docs/results.md``, "Regime ladder (a) for an owner without labels" and
#: "Regime ladder (b): the unlabelled owner's marks"). It depends on the practitioner's
#: recipe: on models trained without augmentation C2 with ``dither`` K = 1 detected 5/5
#: and C4 with the training family 0/5 ("Adaptive attacks", row ``noaug``);
#: docs/owner.md says when to file that claim instead.
UNLABELLED_FAMILY: Final = "pad-shift-flip-dither"
#: Knowledge choices that resolve to C4 (the condition itself, or the word), whose default
#: family is :data:`UNLABELLED_FAMILY`.
C4_CHOICES: Final = frozenset(
    {"C4", *(word for word, conditions in KNOWLEDGE_WORDS.items() if set(conditions) == {"C4"})}
)


@dataclass(frozen=True)
class ScoreChoice:
    """The score fields of a claim (spec §10.1), those a function does not use unset.

    ``spec`` is the score they ask for, checked as the verifier will check it: what a
    :class:`~twinaudit.protocol.claim.params.ClaimParams` carries.
    """

    function: str
    k: int = 0
    perturbation: str = ""
    knowledge: str = ""
    #: The classifier's statistic: "" (the paper's entropy) or ``logit``.
    statistic: str = ""
    #: The classifier's tie margin (spec §7.1; C1 and C2): 0 ties equal scores only.
    margin: float = 0.0
    spec: ScoreRequest | None = field(default=None, compare=False, repr=False)


def choose_score(
    item_kind: str,
    function: str | None = None,
    *,
    k: int | None = None,
    perturbation: str | None = None,
    knowledge: str | None = None,
    statistic: str | None = None,
    margin: float | None = None,
    has_labels: bool = False,
) -> ScoreChoice:
    """Return the score fields of a claim on a vault of ``item_kind`` items.

    ``function`` defaults to :data:`DEFAULT_SCORE` of the item kind; a parameter left
    None takes the function's default in :data:`SCORE_PARAMETERS` (the image-classifier's
    K is :data:`FAMILY_K` when the perturbation named is not a single-copy family,
    and its margin :data:`DEFAULT_MARGIN` for a probability condition with the entropy
    statistic), except the
    image-classifier's knowledge: ``labelled`` when every item of the vault carries a
    committed label (``has_labels``), else ``unlabelled``; the verifier resolves the
    word to the recommended condition the oracle supports (C3; C4). C4, named or the
    word, takes :data:`UNLABELLED_FAMILY` when no family is named. The fields are
    checked as the verifier will check them (:func:`score_request_from_fields`), so
    that a claim the verifier would refuse fails here, before the arbiter is contacted.

    Raises:
        InputError: an unknown function, a parameter the function does not take
            (named as ``owner claim``'s option), a function that does not score
            ``item_kind`` items, or a condition that uses labels (C1, C3,
            ``labelled``) on a vault whose items do not all carry one.
        ParameterError: a parameter outside its domain.

    """
    if function is None:
        if item_kind not in DEFAULT_SCORE:
            raise InputError(f"no score function for {item_kind!r} items")
        function = DEFAULT_SCORE[item_kind]
    if function not in SCORE_PARAMETERS:
        raise InputError(f"unknown score function {function!r}; known: {sorted(SCORE_PARAMETERS)}")
    takes = SCORE_PARAMETERS[function]
    given: dict[str, int | str | float | None] = {
        "k": k,
        "perturbation": perturbation,
        "knowledge": knowledge,
        "statistic": statistic,
        "margin": margin,
    }
    for name, value in given.items():
        if value is not None and name not in takes:
            accepted = ", ".join(f"--{n}" for n in takes) or "no parameters"
            raise InputError(f"--{name} does not apply to --score {function} (it takes {accepted})")
    if knowledge is None and "knowledge" in takes:
        if statistic == "logit" or margin:  # probabilities: C1 with the labels, C2 without
            knowledge = "C1" if has_labels else "C2"
        else:
            knowledge = "labelled" if has_labels else str(takes["knowledge"])
    if perturbation is None and function == CLASSIFIER and knowledge in C4_CHOICES:
        perturbation = UNLABELLED_FAMILY  # C4 needs copies that differ (spec §10.3)
    if margin is None and function == CLASSIFIER:
        entropy = statistic in (None, "", "entropy")
        margin = DEFAULT_MARGIN if entropy and knowledge in MARGIN_CHOICES else 0.0
    if k is None and function == CLASSIFIER and perturbation not in (None, *SINGLE_COPY):
        k = FAMILY_K  # copies that differ need several of them (a lone crop is noise)
    if statistic is None and "statistic" in takes:
        statistic = "" if takes["statistic"] == "entropy" else str(takes["statistic"])
    choice = ScoreChoice(
        function,
        k=k if k is not None else int(takes.get("k", 0)),
        perturbation=perturbation
        if perturbation is not None
        else str(takes.get("perturbation", "")),
        knowledge=knowledge if knowledge is not None else "",
        statistic=statistic if statistic is not None else "",
        margin=float(margin or 0.0),
    )
    try:
        spec = score_request_from_fields(
            choice.function,
            choice.k,
            choice.perturbation,
            choice.knowledge,
            choice.statistic,
            margin=choice.margin,
        )
    except ParameterError as exc:
        if exc.rule != C4_ONE_COPY_RULE or choice.knowledge == "C4":
            raise
        # The word was asked for, not C4 itself: say what it means here.
        raise ParameterError(
            f"{exc}; the word {choice.knowledge!r} asks for C4, so name a family whose "
            "copies differ, or --knowledge C2 to read the probabilities of one copy"
        ).with_rule(C4_ONE_COPY_RULE) from exc
    if spec.item_kind != item_kind:
        raise InputError(
            f"the {function} score scores {spec.item_kind} items; "
            f"this vault holds {item_kind} items"
        )
    if choice.knowledge in LABELLED_CHOICES and not has_labels:
        raise InputError(
            f"knowledge {choice.knowledge} uses committed labels; not every item of this "
            "vault carries one (use unlabelled, C2 or C4)"
        )
    return dataclasses.replace(choice, spec=spec)


@dataclass
class ClaimOutcome:
    """What the stream produced: the claim id, every progress message, the verdict."""

    claim_id: str = ""
    progress: list[pb.Progress] = field(default_factory=list)
    verdict: bytes = b""
    transcript_hash: bytes = b""


_END = object()


def arbiter_key_id(channel: grpc.Channel, timeout_s: float) -> str:
    """Return the key id of the verifier on ``channel``, as it states it (GetPublicKey).

    A claim request names the arbiter it is for, so that it is good at that one only;
    the key id is computed from the public key the verifier sends, not taken on trust.
    A verifier that states another key than the one the owner trusts gets a request good
    at itself alone, and its verdict fails the owner's check.
    """
    stub = pb_grpc.VerifierStub(channel)  # type: ignore[no-untyped-call]
    answer = stub.GetPublicKey(pb.GetPublicKeyRequest(), timeout=timeout_s)
    return key_id(load_public_key_pem(bytes(answer.public_key_pem)))


def sign_start(
    start: pb.ClaimStart, claim_key: Ed25519PrivateKey, arbiter: str, *, nonce: bytes | None = None
) -> None:
    """Sign ``start`` as a claim request for ``arbiter`` with a fresh nonce (spec §10.7).

    The envelope goes into ``start.authorization``; it covers every other field of the
    message, as :func:`~twinaudit.wire.claim_start.start_map` lists them. ``nonce`` is drawn from
    the OS CSPRNG unless given (tests that must replay exactly give one).
    """
    request = SignedRequest(
        arbiter=arbiter,
        start=start_map(start),
        nonce=secrets.token_bytes(NONCE_BYTES) if nonce is None else nonce,
    )
    start.authorization = sign_claim_request(request, claim_key)


def _start_message(
    request: ClaimParams | pb.ClaimStart,
    channel: grpc.Channel,
    *,
    resume_claim_id: str,
    claim_key: Ed25519PrivateKey | None,
    arbiter: str | None,
    deadline: float,
) -> pb.ClaimStart:
    if isinstance(request, pb.ClaimStart):
        start = pb.ClaimStart()
        start.CopyFrom(request)
        start.resume_claim_id = resume_claim_id or start.resume_claim_id
    else:
        start = to_claim_start(request, resume_claim_id)
    if claim_key is not None:
        if arbiter is None:
            arbiter = arbiter_key_id(channel, max(0.0, deadline - time.monotonic()))
        sign_start(start, claim_key, arbiter)
    return start


def run_claim(
    channel: grpc.Channel,
    request: ClaimParams | pb.ClaimStart,
    open_pair: Callable[[int], Opening],
    *,
    claim_key: Ed25519PrivateKey | None = None,
    arbiter: str | None = None,
    on_progress: Callable[[pb.Progress], None] | None = None,
    on_accepted: Callable[[str], None] | None = None,
    resume_claim_id: str = "",
    timeout_s: float = CLAIM_DEADLINE_S,
) -> ClaimOutcome:
    """File a claim and answer the verifier's opening requests until it returns a verdict.

    ``request`` is the claim's parameters, checked (:class:`ClaimParams`, what the owner
    files), or a ``ClaimStart`` as it goes on the wire, unchecked (for tools and tests
    that must also send what the verifier refuses). ``open_pair(i)`` must return the
    opening of pair ``i``; it is called only for the indices the verifier asks for, in
    its order. ``claim_key`` signs the claim request
    (spec §10.7) on a record that binds it, for the arbiter whose key id is ``arbiter``
    (asked of the verifier when None); None sends none, as a claim on a record escrowed
    before claim keys must. ``on_accepted(claim_id)`` runs once the verifier has filed
    (or resumed) the claim. gRPC errors propagate as ``grpc.RpcError`` with the
    verifier's status and message.
    """
    deadline = time.monotonic() + timeout_s
    outbox: queue.Queue[object] = queue.Queue()
    start = _start_message(
        request,
        channel,
        resume_claim_id=resume_claim_id,
        claim_key=claim_key,
        arbiter=arbiter,
        deadline=deadline,
    )
    outbox.put(pb.ClaimMessage(start=start))

    def messages() -> Iterator[pb.ClaimMessage]:
        while True:
            item = outbox.get()
            if item is _END:
                return
            assert isinstance(item, pb.ClaimMessage)
            yield item

    stub = pb_grpc.VerifierStub(channel)  # type: ignore[no-untyped-call]
    outcome = ClaimOutcome()
    responses = stub.FileClaim(messages(), timeout=max(0.0, deadline - time.monotonic()))
    done = threading.Event()
    try:
        for message in responses:
            kind = message.WhichOneof("kind")
            if kind == "accepted":
                outcome.claim_id = message.accepted.claim_id
                if on_accepted is not None:
                    on_accepted(outcome.claim_id)
            elif kind == "request":
                for part in _openings(message.request, open_pair):
                    outbox.put(part)
            elif kind == "progress":
                outcome.progress.append(message.progress)
                if on_progress is not None:
                    on_progress(message.progress)
            elif kind == "verdict":
                outcome.verdict = message.verdict.verdict
                outcome.transcript_hash = message.verdict.transcript_hash
                done.set()
    finally:
        outbox.put(_END)
    if not done.is_set():
        raise InputError("the verifier closed the claim stream without a verdict")
    return outcome


def _openings(
    request: pb.OpeningRequest, open_pair: Callable[[int], Opening]
) -> list[pb.ClaimMessage]:
    """Return the messages that answer ``request``: its pairs in order, split by bytes.

    Each message stays under the message cap; a pair too large for one message goes in
    parts (spec §10.2 step 4, :mod:`twinaudit.wire.openings`).
    """
    pairs = []
    for index in request.indices:
        opening = open_pair(int(index))
        if opening.index != index:
            raise TwinauditError(f"opening source returned pair {opening.index} for {index}")
        pairs.append(
            ReceivedPair(
                opening.index, opening.salt, opening.version0, opening.version1, opening.proof
            )
        )
    return list(opening_messages(pairs))


@dataclass(frozen=True)
class DryRun:
    """What a dry run found (spec §10.7): the claim as it would start, nothing filed."""

    #: The oracle's Describe map, canonically encoded, and the score map the claim would
    #: record (its knowledge condition resolved).
    oracle: bytes
    score: bytes
    n_pairs: int
    #: Claims counted on the record so far: a claim filed now has earlier_claims this.
    earlier_claims: int
    #: One (shape, error) per probe shape; error "" where the oracle answered.
    probes: tuple[tuple[tuple[int, int, int], str], ...]


def dry_run_claim(
    channel: grpc.Channel,
    request: ClaimParams,
    *,
    claim_key: Ed25519PrivateKey | None,
    arbiter: str | None = None,
    probes: tuple[tuple[int, int, int], ...] = (),
    timeout_s: float = CLAIM_DEADLINE_S,
) -> DryRun:
    """Ask the verifier to check a claim without filing it (spec §10.7).

    The verifier checks the record, the signed request, the parameters and the oracle,
    and has the oracle answer one mid-grey image of each shape of ``probes`` (the
    vault's image shapes, at most 8). Nothing is filed or counted.
    """
    deadline = time.monotonic() + timeout_s
    start = to_claim_start(request)
    start.dry_run = True
    for height, width, channels in probes:
        start.probes.add(height=height, width=width, channels=channels)
    if claim_key is not None:
        if arbiter is None:
            arbiter = arbiter_key_id(channel, max(0.0, deadline - time.monotonic()))
        sign_start(start, claim_key, arbiter)
    stub = pb_grpc.VerifierStub(channel)  # type: ignore[no-untyped-call]
    answers = stub.FileClaim(
        iter([pb.ClaimMessage(start=start)]), timeout=max(0.0, deadline - time.monotonic())
    )
    for message in answers:
        if message.WhichOneof("kind") == "dry_run":
            report = message.dry_run
            return DryRun(
                oracle=bytes(report.oracle),
                score=bytes(report.score),
                n_pairs=int(report.n_pairs),
                earlier_claims=int(report.earlier_claims),
                probes=tuple(
                    (
                        (int(p.shape.height), int(p.shape.width), int(p.shape.channels)),
                        "" if p.ok else p.error,
                    )
                    for p in report.probes
                ),
            )
    raise InputError("the verifier ended the dry run without a report")
