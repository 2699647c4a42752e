"""Running a failed claim again, and which claims count (spec §10.7).

A claim counts on its record from the moment the arbiter files it (before its first
opening request), whatever becomes of it. A claim that failed before any pair's
outcome was computed may be run again by its owner, as *the same claim*: a resume of
its id, from its saved state, with the claim map it was filed with (same claim nonce,
so the same audit seed, order and queries). It stays one claim, counted once. The
arbiter refuses such a restart when the claim computed an outcome, or when another
claim was filed on the record after it (whose exclusions and count were fixed with
this one stopped).

:func:`restart_refusal` is the rule the arbiter applies; :func:`recount` replays a
record's history as spec/vectors/filing.json's ``count`` cases write it, so that the
rule and the count can be checked without a store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from twinaudit.protocol.errors import InputError

#: The status of a claim that failed (spec §10.2 step 4): the only one a restart takes.
FAILED: Final = "failed"
#: The answers the arbiter gives a start, and what became of a filed claim, as the
#: ``count`` vectors name them (spec §14).
ANSWERS: Final = frozenset(
    {"refused", "dry-run", "filed", "resumed", "failed-no-outcome", "failed-after-outcome"}
)
#: The one request whose answer a ``count`` vector expects.
RESTART: Final = "restart"


def restart_refusal(
    claim_id: str,
    *,
    status: str,
    outcome_computed: bool,
    claim_record: int,
    record: int,
    filed_on_record: Sequence[str],
) -> str | None:
    """Return why a resume of claim ``claim_id`` is refused, or None to run it.

    An open claim resumes as any claim does (on its own record); a failed one only as
    below.

    ``status`` is the claim's stored status, ``outcome_computed`` whether its saved state
    records any pair's outcome, ``claim_record`` the record it was filed on, ``record``
    the record the resume names, and ``filed_on_record`` the ids of the claims filed on
    that record, oldest first. Spec §10.7, *Running a failed claim again*: a failed
    claim may run again only on its own record, when it computed no outcome and no claim
    was filed on the record after it. The reason is the refusal's message
    (``invalid-state``).
    """
    if claim_record != record:
        return f"claim {claim_id!r} was filed on record {claim_record}, not {record}"
    if status == "open":
        return None  # an ordinary resume (spec §10.2 step 8), not a restart
    if status != FAILED:
        return f"claim {claim_id!r} is {status}; it cannot resume"
    if outcome_computed:
        return (
            f"claim {claim_id!r} failed after it computed a pair's outcome; it cannot run "
            "again (spec 10.7): only a claim that failed before any outcome can"
        )
    if claim_id not in filed_on_record:
        return f"claim {claim_id!r} is not filed on record {record}"
    later = len(filed_on_record) - 1 - list(filed_on_record).index(claim_id)
    if later:
        return (
            f"claim {claim_id!r} failed and {later} claim(s) were filed on record {record} "
            "after it; it cannot run again (spec 10.7): their excluded pairs and "
            "earlier_claims were fixed with it stopped"
        )
    return None


@dataclass
class _Claim:
    record: int
    status: str
    outcome_computed: bool = False


@dataclass
class Recount:
    """A record history replayed (:func:`recount`): what each filed claim's verdict counts."""

    #: Each filed claim's ``earlier_claims``: the claims filed on its record before it.
    earlier_claims: dict[str, int] = field(default_factory=dict)
    #: The answer to each restart request, in order: ``"resumed"`` or ``"refused"``.
    restarts: list[str] = field(default_factory=list)


def recount(events: Iterable[Mapping[str, object]]) -> Recount:
    """Replay claim events as a ``count`` vector lists them (spec §10.7, §14).

    Each event names a ``claim`` and either the arbiter's ``answer`` (one of
    :data:`ANSWERS`) or the ``request`` :data:`RESTART`, a resume of a claim that
    failed, whose answer this function decides by :func:`restart_refusal`. An event is
    on record 0 unless it names another ``record``. A claim counts from its filing;
    refusals, dry runs, resumes and restarts file nothing.
    """
    claims: dict[str, _Claim] = {}
    filed: dict[int, list[str]] = {}
    result = Recount()
    for event in events:
        name, record = event.get("claim"), event.get("record", 0)
        answer, request = event.get("answer"), event.get("request")
        if not isinstance(name, str) or isinstance(record, bool) or not isinstance(record, int):
            raise InputError("an event names a claim (text) and maybe a record (an integer)")
        if (answer is None) == (request is None):
            raise InputError("an event has exactly one of 'answer' and 'request'")
        if request is not None:
            if request != RESTART:
                raise InputError(f"unknown request {request!r}")
            claim = claims.get(name)
            refusal = (
                f"no claim {name!r}"
                if claim is None
                else restart_refusal(
                    name,
                    status=claim.status,
                    outcome_computed=claim.outcome_computed,
                    claim_record=claim.record,
                    record=record,
                    filed_on_record=filed.get(record, []),
                )
            )
            if claim is not None and refusal is None:
                claim.status = "open"
            result.restarts.append("refused" if refusal else "resumed")
            continue
        if answer not in ANSWERS:
            raise InputError(f"unknown answer {answer!r}")
        if answer == "filed":
            if name in claims:
                raise InputError(f"claim {name!r} is filed once")
            on_record = filed.setdefault(record, [])
            result.earlier_claims[name] = len(on_record)
            on_record.append(name)
            claims[name] = _Claim(record, "open")
        elif answer in ("failed-no-outcome", "failed-after-outcome"):
            claim = claims.get(name)
            if claim is None or claim.status != "open":
                raise InputError(f"claim {name!r} fails only while it runs (filed or resumed)")
            claim.status = FAILED
            claim.outcome_computed = claim.outcome_computed or answer == "failed-after-outcome"
    return result
