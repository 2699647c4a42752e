"""The owner's side of a claim: a bidirectional stream with the arbiter's verifier.

The owner starts the claim, then answers each :class:`OpeningRequest` with the
requested pairs, in the requested order, each with its salt, both versions and
its Merkle inclusion proof. The verifier streams progress and finally the signed
verdict. The owner never chooses which pairs are opened.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import grpc

from protocol import SPEC_VERSION
from protocol.errors import InputError, TwinauditError
from twinaudit.transport import CLAIM_DEADLINE_S
from twinaudit.verifier.v1 import verifier_pb2 as pb
from twinaudit.verifier.v1 import verifier_pb2_grpc as pb_grpc


@dataclass(frozen=True)
class Opening:
    """Everything needed to open pair ``index``."""

    index: int
    salt: bytes
    version0: bytes
    version1: bytes
    proof: list[bytes]


@dataclass(frozen=True)
class ClaimRequest:
    """What the owner asks the arbiter to check (spec §10.1)."""

    record_index: int
    record_root: bytes
    oracle_endpoint: str
    model_name: str
    score_function: str = "image-classifier"
    k: int = 1
    perturbation: str = "none"
    knowledge: str = "C2"
    test: str = "mixture-e"
    p: float = 0.05
    alpha: float = 0.0
    tie_rule: str = "skip"
    max_pairs: int = 0
    query_budget: int = 0
    window: int = 0

    def to_proto(self, resume_claim_id: str = "") -> pb.ClaimStart:
        """Return the ClaimStart message."""
        return pb.ClaimStart(
            spec_version=SPEC_VERSION,
            record_index=self.record_index,
            record_root=self.record_root,
            model=pb.ModelRef(oracle_endpoint=self.oracle_endpoint, name=self.model_name),
            score=pb.ScoreSpec(
                function=self.score_function,
                k=self.k,
                perturbation=self.perturbation,
                knowledge=self.knowledge,
            ),
            test=pb.TestSpec(name=self.test, p=self.p, alpha=self.alpha),
            tie_rule=self.tie_rule,
            max_pairs=self.max_pairs,
            query_budget=self.query_budget,
            resume_claim_id=resume_claim_id,
            window=self.window,
        )


@dataclass
class ClaimOutcome:
    """What the stream produced: the claim id, every progress message, the verdict."""

    claim_id: str = ""
    progress: list[pb.Progress] = field(default_factory=list)
    verdict: bytes = b""
    transcript_hash: bytes = b""


_END = object()


def run_claim(
    channel: grpc.Channel,
    request: ClaimRequest,
    open_pair: Callable[[int], Opening],
    *,
    on_progress: Callable[[pb.Progress], None] | None = None,
    resume_claim_id: str = "",
    timeout_s: float = CLAIM_DEADLINE_S,
) -> ClaimOutcome:
    """File a claim and answer the verifier's opening requests until it returns a verdict.

    ``open_pair(i)`` must return the opening of pair ``i``; it is called only for the
    indices the verifier asks for, in its order. gRPC errors propagate as
    ``grpc.RpcError`` with the verifier's status and message.
    """
    outbox: queue.Queue[object] = queue.Queue()
    outbox.put(pb.ClaimMessage(start=request.to_proto(resume_claim_id)))

    def messages() -> Iterator[pb.ClaimMessage]:
        while True:
            item = outbox.get()
            if item is _END:
                return
            assert isinstance(item, pb.ClaimMessage)
            yield item

    stub = pb_grpc.VerifierStub(channel)  # type: ignore[no-untyped-call]
    outcome = ClaimOutcome()
    responses = stub.FileClaim(messages(), timeout=timeout_s)
    done = threading.Event()
    try:
        for message in responses:
            kind = message.WhichOneof("kind")
            if kind == "accepted":
                outcome.claim_id = message.accepted.claim_id
            elif kind == "request":
                outbox.put(pb.ClaimMessage(openings=_openings(message.request, open_pair)))
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


def _openings(request: pb.OpeningRequest, open_pair: Callable[[int], Opening]) -> pb.Openings:
    pairs = []
    for index in request.indices:
        opening = open_pair(int(index))
        if opening.index != index:
            raise TwinauditError(f"opening source returned pair {opening.index} for {index}")
        pairs.append(
            pb.PairOpening(
                index=opening.index,
                salt=opening.salt,
                version0=opening.version0,
                version1=opening.version1,
                proof=opening.proof,
            )
        )
    return pb.Openings(pairs=pairs)
