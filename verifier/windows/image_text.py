"""Windows of the ``image-text`` score (spec §10.6): both images and the caption, once."""

from __future__ import annotations

import hashlib

import numpy as np

from protocol.encoding import Value
from protocol.errors import OracleError, TwinauditError
from protocol.items import Item
from verifier.oracles.base import Oracle, OracleInfo
from verifier.oracles.embedding import matrix_from_value, matrix_to_value
from verifier.oracles.image_text import ImageTextAnswer, ImageTextOracle
from verifier.scoring.image_text import ImageTextSpec, make_query, score

from .base import PairScores, QueryBatch, WindowScorer, replay_error, shuffled, unshuffle


class ImageTextWindows(WindowScorer):
    """The 2w images and w captions of a window, each list shuffled; image-caption cosine."""

    oracle_type = ImageTextOracle

    def __init__(self, spec: ImageTextSpec) -> None:
        """Score with ``spec``."""
        self.spec = spec

    def check_item(self, item: Item) -> None:
        """Captioned-image items only."""
        self.spec.check_item(item)

    def build(
        self, seed: bytes, number: int, indices: list[int], items: list[tuple[Item, Item]]
    ) -> QueryBatch:
        """Images (pair order, version 0 then 1) and captions (pair order), each shuffled.

        One stream ``shuffle/<j>`` permutes the 2w images first, then the w captions.
        """
        queries = []
        captions = []
        for pair in items:
            for item in pair:
                queries.append(make_query(self.spec.check_item(item)))
            captions.append(self.spec.check_item(pair[0]).caption)
        image_order, text_order = shuffled(seed, number, len(queries), len(captions))
        images = np.ascontiguousarray(np.stack([queries[n] for n in image_order]))
        texts = [captions[n] for n in text_order]
        return QueryBatch(images, texts, image_order, text_order, [], queries)

    def ask(self, oracle: Oracle, info: OracleInfo, batch: QueryBatch) -> object:
        """Embed the images and captions; validate the answer."""
        assert isinstance(oracle, ImageTextOracle)
        assert batch.images is not None
        answer = oracle.embed_image_text(np.ascontiguousarray(batch.images), list(batch.texts))
        if not isinstance(answer, ImageTextAnswer):
            raise OracleError(
                "invalid-answer", "embed_image_text did not return an ImageTextAnswer"
            )
        return answer.validate(len(batch.image_order), len(batch.text_order))

    def score(
        self,
        info: OracleInfo,
        batch: QueryBatch,
        answer: object,
        items: list[tuple[Item, Item]],
    ) -> list[PairScores]:
        """Score each version by the cosine of its image's and its caption's embeddings."""
        assert isinstance(answer, ImageTextAnswer)
        images = answer.images[unshuffle(batch.image_order)]
        captions = answer.texts[unshuffle(batch.text_order)]
        results = []
        for j, pair in enumerate(items):
            first = self.spec.check_item(pair[0])
            pair_images = np.ascontiguousarray(images[2 * j : 2 * j + 2])
            caption = np.ascontiguousarray(captions[j : j + 1])
            scores = [score(pair_images[v], caption[0]) for v in (0, 1)]
            digests: list[Value] = [
                hashlib.sha256(q.tobytes()).digest() for q in batch.queries[2 * j : 2 * j + 2]
            ]
            fields: dict[str, Value] = {
                "shape": [int(d) for d in first.image.pixels.shape],
                "query_digests": digests,
                "answers": {
                    "images": matrix_to_value(pair_images),
                    "caption": matrix_to_value(caption),
                },
                "scores": list[Value](scores),
            }
            results.append(PairScores(fields, (scores[0], scores[1])))
        return results

    def replay(self, info: OracleInfo, seed: bytes, record: dict[str, Value]) -> list[float]:
        """Recompute both scores from the recorded embeddings."""
        answers = record.get("answers")
        try:
            if not isinstance(answers, dict) or set(answers) != {"images", "caption"}:
                raise replay_error(record.get("index"), "answers must hold images and caption")
            images = matrix_from_value(answers["images"], 2, "image embeddings")
            caption = matrix_from_value(answers["caption"], 1, "caption embedding")
            ImageTextAnswer(images, caption).validate(2, 1)
            return [score(images[v], caption[0]) for v in (0, 1)]
        except TwinauditError as exc:
            if exc.code == "verification-failed":
                raise
            raise replay_error(record.get("index"), f"recorded answers: {exc}") from None
