"""``--json``: the one JSON object a command prints on stdout instead of its text result.

With ``--json`` a command writes exactly one JSON object on stdout (sorted keys, one
line) and its progress lines, notes and errors on stderr, so a script can read
stdout whole. Byte strings are written as hex. :func:`verdict_figures` is what
``owner claim``, ``verifier check`` and ``verifier replay`` report about a verdict.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, Final

from twinaudit.protocol.claim.scores.classifier import FUNCTION as CLASSIFIER
from twinaudit.protocol.claim.scores.classifier import LABEL_ONLY, ScoreSpec
from twinaudit.protocol.claim.verdict import Verdict
from twinaudit.protocol.encoding import canonical
from twinaudit.protocol.keys import key_id, public_key_from_raw

#: Exit status of ``owner claim --exit-code`` for a verdict of NOT-DETECTED.
EXIT_NOT_DETECTED: Final = 3


def _plain(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def print_json(value: Mapping[str, Any]) -> None:
    """Write ``value`` as one JSON object on one line of stdout, its keys in their order.

    The order is the builder's, so that what matters comes first: a verdict's figures
    lead with the record-level bound (spec §11).
    """
    sys.stdout.write(json.dumps(dict(value), default=_plain) + "\n")
    sys.stdout.flush()


def verdict_figures(verdict: Verdict) -> dict[str, Any]:
    """Return a checked verdict's decision and figures (no opening, no transcript)."""
    final, claim = verdict.final, verdict.claim
    return {
        # The record-level bound first (spec §11): what a reader weighs a detection by.
        "false_detection_bound": false_detection_bound(verdict),
        "claims_authenticated": claims_authenticated(verdict),
        "claim_id": verdict.claim_id,
        "decision": verdict.decision,
        "detected": verdict.detected,
        "stop": verdict.stop,
        "record": claim.record_index,
        "n_pairs": claim.n_pairs,
        "pairs_opened": len(verdict.opened),
        "draws": final.draws,
        "successes": final.successes,
        "interval": list(final.interval) if final.interval is not None else None,
        "log_statistic": final.log_statistic,
        "queries": verdict.queries,
        "test": claim.test_name,
        "test_params": claim.test_params,
        "score": canonical(claim.score.to_value()),  # its keys in the verdict's order
        "earlier_claims": verdict.earlier_claims,
        "excluded_pairs": len(claim.excluded),
        "unopened_pairs": unopened_pairs(verdict),
        "model": claim.model_name,
        "oracle": claim.oracle,
        # "area": every image query was fitted to the oracle's input_shape (spec §10.2
        # step 5); None: the images went at their own size.
        "input_fit": claim.input_fit or None,
        # True: the oracle signed every answer with the key its Describe map names (spec
        # §10.8), which a replay checks; False: the answers are unsigned.
        "answers_signed": bool(claim.oracle_info.answer_key),
        "arbiter": verdict.arbiter,
        "time": verdict.time,
    }


def verdict_summary(verdict: Verdict) -> str:
    """Return a checked verdict's decision and figures in one line (``verifier check``)."""
    final = verdict.final
    return (
        f"{verdict.decision.upper()} (stop: {verdict.stop}; pairs opened "
        f"{len(verdict.opened)}, draws {final.draws}, successes {final.successes}, "
        f"queries {verdict.queries}, test {verdict.claim.test_name})"
    )


def false_detection_bound(verdict: Verdict) -> float:
    """Return ``(earlier_claims + 1)·p`` (at most 1): the bound across the record's claims.

    Each claim on a record has its own chance ``p`` of a false detection, whether or
    not it excludes the pairs earlier claims opened (spec §11, §13).
    """
    return verdict.record_bound()


def unopened_pairs(verdict: Verdict) -> int | None:
    """Return how many of the record's pairs neither this claim nor an earlier one opened.

    Exact when the verdict knows every earlier claim's pairs: it is the record's first
    claim, or its claim map lists the pairs earlier claims disclosed (``excluded``,
    spec §10.1). None for a later claim that did not exclude them. A next claim with
    fresh pairs opens only these (fewer if claims were filed in between).
    """
    claim = verdict.claim
    if verdict.earlier_claims and not claim.excluded:
        return None
    return claim.population - len(verdict.opened)


def claims_authenticated(verdict: Verdict) -> bool:
    """Whether the verdict's record binds a claim key, so only its owner could file claims.

    A verdict on such a record carries ``filing``, the owner's signed request (spec §11);
    one on a record escrowed before claim keys (or signed before them) does not, and its
    ``earlier_claims`` may count claims that anyone filed.
    """
    return verdict.authenticated


def bound_line(verdict: Verdict) -> str:
    """Return the record-level bound a verdict is read by, in one line (spec §11)."""
    earlier, p = verdict.earlier_claims, verdict.p
    return (
        f"false-detection bound {false_detection_bound(verdict):g} = (earlier claims + 1)·p "
        f"= ({earlier} + 1)·{p:g}, across the record's {earlier + 1} "
        f"claim{'s' if earlier else ''} (p = {p:g} for this claim alone)"
    )


def authentication_line(verdict: Verdict) -> str:
    """Say who could have filed the claims a verdict counts (spec §10.7, §11)."""
    if claims_authenticated(verdict):
        return (
            "claims on this record are signed by its owner's claim key: only she could file "
            "the claims counted, and this one is her signed request (the verdict's filing)"
        )
    return (
        "claims on this record are not authenticated (escrowed before claim keys): anyone "
        "who read the public log could have filed the earlier claims counted, so the bound "
        "may be larger than the owner's own claims would make it"
    )


def answers_line(verdict: Verdict) -> str:
    """Say whether the practitioner signed the answers a verdict rests on (spec §10.8)."""
    key = verdict.claim.oracle_info.answer_key
    if key:
        return (
            f"answers signed by the practitioner's key {key_id(public_key_from_raw(key))}: "
            "with the transcript, replay checks every answer against its signature, so no "
            "one, the arbiter included, can alter them unseen"
        )
    return (
        "answers unsigned: the oracle holds no answer key, so the recorded answers are "
        "bound by the arbiter's signature alone (spec §10.8, §12)"
    )


def verdict_reading(verdict: Verdict) -> list[str]:
    """Return the lines that say how to read a verdict (``verifier check``, ``owner claim``).

    The false-detection bound across the record's claims first, who could file them,
    what NOT DETECTED does not establish (after unlearning too), the pairs still
    unopened, and whether the practitioner signed the answers.
    """
    lines = [bound_line(verdict), authentication_line(verdict)]
    if not verdict.detected:
        lines.append(
            "NOT DETECTED is not proof that the model does not use the data, nor, after "
            "unlearning, that the data was removed: the test did not reach its threshold "
            f"within the {len(verdict.opened)} pairs opened"
        )
    lines.append(pairs_left_line(verdict))
    lines.append(answers_line(verdict))
    return lines


def pairs_left_line(verdict: Verdict) -> str:
    """Return one line saying how many of the record's pairs no claim has opened yet."""
    claim = verdict.claim
    left = unopened_pairs(verdict)
    if left is None:
        return (
            f"pairs left: unknown from this verdict (it did not exclude the pairs of the "
            f"{verdict.earlier_claims} earlier claims on record {claim.record_index}); "
            "a claim with --fresh-pairs lists them as excluded"
        )
    return (
        f"pairs left: {left} of record {claim.record_index}'s {claim.n_pairs} never opened "
        f"(this claim opened {len(verdict.opened)}, earlier claims {len(claim.excluded)}); "
        "a claim with --fresh-pairs opens only those"
    )


def label_only_follow_up(verdict: Verdict) -> str | None:
    """Return what an owner can do after a C3 or C4 claim that found nothing, or None.

    Only for an image-classifier claim in C3 or C4 that ended NOT-DETECTED: those
    conditions read the top label alone, and a model that fits its training images
    exactly (trained without augmentation) labels both twins of nearly every pair alike
    under one ``dither`` copy or the training family's shifts (the evaluation's attacks
    table, row ``noaug``: C3 ``dither`` K = 1 and C4 ``pad-shift-flip`` K = 32 0/5 each).
    Where the oracle answers probabilities the note names C2 with one ``dither`` copy
    (5/5 there); where it answers labels only, the same condition with ``noise`` copies
    at K = 32 (each intensity moved by up to 31 levels, spec §10.3; C3 5/5, C4 4/5
    there), unless the claim already used them.
    """
    claim = verdict.claim
    score = claim.score
    if (
        verdict.detected
        or not isinstance(score, ScoreSpec)
        or score.function != CLASSIFIER
        or score.knowledge not in LABEL_ONLY
    ):
        return None
    probabilities = claim.oracle_info.classify_output == "probabilities"
    if not probabilities and score.perturbation == "noise":
        return None
    claims = verdict.earlier_claims + 2
    knowledge = score.knowledge
    gap = (
        f"{knowledge} counts only pairs whose twins the model labels differently; a model "
        "that fits its training images exactly (trained without augmentation) labels "
        "nearly every pair alike under dither or shifted copies: C3 and C4 found 0/5 such "
        "models (docs/results.md, Adaptive attacks, row noaug). "
    )
    weighed = (
        f"a detection by it is weighed at {claims}p ({claims} claims on the record, times "
        "p) (docs/owner.md, Knowledge conditions)"
    )
    if probabilities:
        return (
            gap + "This oracle answers probabilities: a claim with --knowledge C2 "
            "--perturbation dither on this record can read them (5/5 there), and " + weighed
        )
    return (
        gap + f"This oracle answers labels only: a claim with --knowledge {knowledge} "
        f"--perturbation noise --copies 32 on this record moves each intensity by up to 31 "
        "levels, so that such a model labels some copies differently (C3 5/5, C4 4/5 "
        "there), and " + weighed
    )
