"""Claims against tiny foundation models, in-process: image encoder, language model, CLIP.

For each model type a model trained on the published versions is DETECTED, and the
same model untrained, or trained on other data, is NOT DETECTED; every verdict
replays from its transcript alone; malformed answers fail the window with a typed
error and change nothing. Everything is seeded: the same run every time.
"""

import numpy as np
import pytest
import torch

from tests.support import foundation as fm
from twinaudit.practitioner.tokenizer import ByteTokenizer
from twinaudit.practitioner.torch_encoder import TorchEncoderOracle, TorchImageTextOracle
from twinaudit.practitioner.torch_lm import TorchLanguageModelOracle
from twinaudit.protocol.claim.scores.encoder import EncoderSpec
from twinaudit.protocol.claim.scores.function_only import ImageTextSpec, LanguageSpec
from twinaudit.protocol.claim.transcript import TranscriptWriter, iter_records
from twinaudit.protocol.claim.verdict import parse_verdict
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.errors import OracleError, ParameterError, VerificationError
from twinaudit.protocol.oracles.embedding import EmbeddingAnswer
from twinaudit.protocol.oracles.image_text import ImageTextAnswer
from twinaudit.protocol.oracles.language import LogprobAnswer
from twinaudit.protocol.seeds import publication_bits
from twinaudit.verifier.claim import ClaimParams, ClaimRecord, ClaimSession
from twinaudit.verifier.replay import replay

RHO = bytes(range(32))
NONCE = bytes(range(32, 64))
N = 24
K = 8

torch.set_num_threads(1)


def _published(pair_set, pairs):
    bits = publication_bits(pair_set.root, RHO, len(pair_set))
    return fm.published(pairs, bits)


@pytest.fixture(scope="module")
def encoder_case():
    pairs = fm.marked_images(N, seed=0)
    pair_set = fm.commit("image", pairs)
    other = [a for a, _ in fm.marked_images(N, seed=99)]
    return {
        "pair_set": pair_set,
        "kind": "image",
        "score": EncoderSpec(k=K),
        "trained": TorchEncoderOracle(fm.train_encoder(_published(pair_set, pairs))),
        "untrained": TorchEncoderOracle(fm.train_encoder([], steps=0)),
        "other": TorchEncoderOracle(fm.train_encoder(other)),
    }


@pytest.fixture(scope="module")
def lm_case():
    pairs = fm.text_pairs(N, seed=0)
    pair_set = fm.commit("text", pairs)
    tokenizer = ByteTokenizer()
    texts = [item.text for item in _published(pair_set, pairs)]
    other = [a.text for a, _ in fm.text_pairs(N, seed=99)]
    return {
        "pair_set": pair_set,
        "kind": "text",
        "score": LanguageSpec(),
        "trained": TorchLanguageModelOracle(fm.train_lm(texts), tokenizer),
        "untrained": TorchLanguageModelOracle(fm.train_lm([], steps=0), tokenizer),
        "other": TorchLanguageModelOracle(fm.train_lm(other), tokenizer),
    }


@pytest.fixture(scope="module")
def clip_case():
    pairs = fm.captioned_pairs(N, seed=0)
    pair_set = fm.commit("captioned-image", pairs)
    tokenizer = ByteTokenizer(bos=False)
    other = [a for a, _ in fm.captioned_pairs(N, seed=99)]
    return {
        "pair_set": pair_set,
        "kind": "captioned-image",
        "score": ImageTextSpec(),
        "trained": TorchImageTextOracle(fm.train_dual(_published(pair_set, pairs)), tokenizer),
        "untrained": TorchImageTextOracle(fm.train_dual([], steps=0), tokenizer),
        "other": TorchImageTextOracle(fm.train_dual(other), tokenizer),
    }


CASES = ["encoder_case", "lm_case", "clip_case"]
#: The cases as parameters: training the encoder's and the language model's cases (their
#: module fixtures, made by the first test that asks) takes seconds.
SLOW_CASES = frozenset({"encoder_case", "lm_case"})


def _case(name: str, *values: object) -> object:
    """A parameter set for the case ``name``, marked slow where its fixture is."""
    return pytest.param(name, *values, marks=[pytest.mark.slow] if name in SLOW_CASES else [])


CASE_PARAMS = [_case(name) for name in CASES]


def _session(case, oracle, **params):
    pair_set = case["pair_set"]
    record = ClaimRecord(0, pair_set.root, len(pair_set), case["kind"], RHO, "2026-11-21T20:00:00Z")
    claim = ClaimParams(
        0,
        pair_set.root,
        "in-process",
        "tiny",
        params.pop("score", case["score"]),
        params.pop("test", "mixture-e"),
        0.05,
        **params,
    )
    return ClaimSession.start("claim-1", record, claim, oracle, NONCE)


def _openings(pair_set, indices):
    return [(i, pair_set.pair_opening(i), pair_set.opening(i).proof) for i in indices]


def _run(session, pair_set):
    while indices := session.next_request():
        session.submit(_openings(pair_set, indices))
    return session


def _payload(session):
    return session.verdict_payload(arbiter="k", time="2026-11-21T21:00:00Z", environment={})


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_trained_model_is_detected_and_the_verdict_replays(name, request):
    case = request.getfixturevalue(name)
    session = _run(_session(case, case["trained"]), case["pair_set"])
    assert session.stop == "detected", session.indicators
    verdict = parse_verdict(_payload(session))
    result = replay(verdict, session.transcript.to_bytes())
    assert result.decision == "detected"
    assert result.indicators == session.indicators
    header = next(iter_records(session.transcript.to_bytes()))
    assert header["claim"]["score"] == case["score"].to_value()


@pytest.mark.parametrize("name", CASE_PARAMS)
@pytest.mark.parametrize("model", ["untrained", "other"])
def test_untrained_or_other_model_is_not_detected(name, model, request):
    case = request.getfixturevalue(name)
    session = _run(_session(case, case[model]), case["pair_set"])
    assert session.stop == "exhausted"
    verdict = parse_verdict(_payload(session))
    assert verdict.decision == "not-detected"
    assert replay(verdict, session.transcript.to_bytes()).decision == "not-detected"
    assert len(session.opened) == N


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_queries_count_and_budget(name, request):
    case = request.getfixturevalue(name)
    per_pair = 2 * case["score"].queries_per_version
    session = _run(
        _session(case, case["untrained"], window=3, query_budget=per_pair * 7), case["pair_set"]
    )
    assert session.stop == "budget"
    assert len(session.opened) == 7
    assert session.queries == per_pair * 7


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_resume_and_lookahead_change_nothing(name, request):
    case = request.getfixturevalue(name)
    pair_set, oracle = case["pair_set"], case["untrained"]
    serial = _run(_session(case, oracle, window=5), pair_set)
    part = _session(case, oracle, window=5)
    part.submit(_openings(pair_set, part.next_request()))
    snapshot, records = part.checkpoint()
    resumed = ClaimSession.resume(snapshot, records, part.record, part.params, oracle)
    _run(resumed, pair_set)
    assert encode(_payload(resumed)) == encode(_payload(serial))
    ahead = _session(case, oracle, window=5)
    prepared = ahead.prepare(_openings(pair_set, ahead.next_request()))
    while True:
        answer = ahead.query(prepared)
        following = None
        if indices := ahead.request_ahead():
            following = ahead.prepare(_openings(pair_set, indices))
        ahead.feed(prepared, answer)
        if ahead.stop is not None:
            break
        prepared = following or ahead.prepare(_openings(pair_set, ahead.next_request()))
    assert encode(_payload(ahead)) == encode(_payload(serial))


def _tamper(transcript: bytes, change) -> bytes:
    writer = TranscriptWriter()
    for number, record in enumerate(iter_records(transcript)):
        if number == 1:
            change(record)
        writer.append(record)
    return writer.to_bytes()


def _retarget(verdict, transcript):
    """Point a verdict at a changed transcript, as a dishonest arbiter could."""
    value = dict(verdict.payload)
    writer = TranscriptWriter.from_bytes(transcript)
    value["transcript"] = {"hash": writer.head, "records": writer.count}
    return parse_verdict(value)


@pytest.mark.parametrize("name", CASE_PARAMS)
def test_replay_recomputes_scores_from_the_recorded_answers(name, request):
    case = request.getfixturevalue(name)
    session = _run(_session(case, case["untrained"], max_pairs=4), case["pair_set"])
    verdict = parse_verdict(_payload(session))
    transcript = session.transcript.to_bytes()

    def bump_score(record):
        record["scores"] = [record["scores"][0] + 1.0, record["scores"][1]]

    changed = _tamper(transcript, bump_score)
    with pytest.raises(VerificationError, match="scores"):
        replay(_retarget(verdict, changed), changed)

    def break_answers(record):
        record["answers"] = "nothing"

    broken = _tamper(transcript, break_answers)
    with pytest.raises(VerificationError):
        replay(_retarget(verdict, broken), broken)


@pytest.mark.slow  # the encoder's case trains a model
def test_replay_checks_the_encoder_crops(encoder_case):
    session = _run(
        _session(encoder_case, encoder_case["untrained"], max_pairs=2), encoder_case["pair_set"]
    )
    verdict = parse_verdict(_payload(session))

    def move_crop(record):
        record["params"][0][0]["top"] = (record["params"][0][0]["top"] + 1) % 2

    changed = _tamper(session.transcript.to_bytes(), move_crop)
    with pytest.raises(VerificationError, match="augmentation"):
        replay(_retarget(verdict, changed), changed)


class FaultyEncoder(TorchEncoderOracle):
    def __init__(self, fault):
        super().__init__(fm.train_encoder([], steps=0))
        self.fault = fault

    def embed_images(self, images):
        values = super().embed_images(images).embeddings.copy()
        if self.fault == "nan":
            values[3, 1] = np.nan
        elif self.fault == "rows":
            values = values[:-1]
        elif self.fault == "zero":
            values[0] = 0.0
        elif self.fault == "huge":
            values[0, 0] = 1e30
        return EmbeddingAnswer(values)


class FaultyLm(TorchLanguageModelOracle):
    def __init__(self, fault):
        super().__init__(fm.train_lm([], steps=0), ByteTokenizer())
        self.fault = fault

    def token_logprobs(self, texts):
        vectors = list(super().token_logprobs(texts).logprobs)
        if self.fault == "missing":
            vectors = vectors[:-1]
        elif self.fault == "nan":
            vectors[0] = vectors[0].copy()
            vectors[0][2] = np.nan
        elif self.fault == "positive":
            vectors[1] = vectors[1].copy()
            vectors[1][0] = 0.5
        return LogprobAnswer(tuple(vectors))


class FaultyClip(TorchImageTextOracle):
    def __init__(self, fault):
        super().__init__(fm.train_dual([], steps=0), ByteTokenizer(bos=False))
        self.fault = fault

    def embed_image_text(self, images, texts):
        answer = super().embed_image_text(images, texts)
        if self.fault == "dims":
            return ImageTextAnswer(answer.images, answer.texts[:, :-1].copy())
        if self.fault == "texts":
            return ImageTextAnswer(answer.images, answer.texts[:-1].copy())
        return ImageTextAnswer(answer.images, np.full_like(answer.texts, np.inf))


@pytest.mark.parametrize(
    ("name", "oracle"),
    [
        _case("encoder_case", lambda: FaultyEncoder("nan")),
        _case("encoder_case", lambda: FaultyEncoder("rows")),
        _case("encoder_case", lambda: FaultyEncoder("zero")),
        _case("encoder_case", lambda: FaultyEncoder("huge")),
        _case("lm_case", lambda: FaultyLm("missing")),
        _case("lm_case", lambda: FaultyLm("nan")),
        _case("lm_case", lambda: FaultyLm("positive")),
        _case("clip_case", lambda: FaultyClip("dims")),
        _case("clip_case", lambda: FaultyClip("texts")),
        _case("clip_case", lambda: FaultyClip("inf")),
    ],
)
def test_malformed_answers_fail_the_window_and_change_nothing(name, oracle, request):
    case = request.getfixturevalue(name)
    session = _session(case, oracle())
    before = session.snapshot()
    with pytest.raises(OracleError) as info:
        session.submit(_openings(case["pair_set"], session.next_request()))
    assert info.value.reason == "invalid-answer"
    assert session.snapshot() == before
    assert session.transcript.count == 1


@pytest.mark.slow  # the encoder's and language model's cases train models
def test_score_item_kind_and_oracle_must_match(encoder_case, lm_case, clip_case):
    with pytest.raises(ParameterError, match="reads 'text' items"):
        _session(encoder_case, lm_case["untrained"], score=LanguageSpec())
    with pytest.raises(ParameterError, match="does not offer 'embed-images'"):
        _session(encoder_case, lm_case["untrained"])
    with pytest.raises(ParameterError, match="does not offer 'token-logprobs'"):
        _session(lm_case, clip_case["untrained"])
    with pytest.raises(ParameterError, match="does not offer 'embed-image-text'"):
        _session(clip_case, encoder_case["untrained"])
