"""Windows of the ``image-text`` score (spec §10.6): both images and the caption, once."""

from __future__ import annotations

from typing import Any

import numpy as np

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import OracleError, TwinauditError
from twinaudit.protocol.items import CaptionedImageItem, Item
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.protocol.oracles.embedding import EmbeddingAnswer, matrix_from_value, matrix_to_value
from twinaudit.protocol.oracles.image_text import ImageTextAnswer, ImageTextOracle
from twinaudit.verifier.scoring.image_text import ImageTextSpec, make_query, score

from .base import (
    QueryBatch,
    WindowScorer,
    by_shape,
    image_shape_value,
    in_sent_order,
    query_digests,
    replay_error,
    shuffled,
    unshuffle,
)


class ImageTextWindows(WindowScorer[ImageTextSpec, ImageTextAnswer]):
    """The 2w images and w captions of a window, each list shuffled; image-caption cosine."""

    oracle_type = ImageTextOracle
    answer_type = ImageTextAnswer

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
                version = self.spec.check_item(item)
                image = self.fitted(version.image)
                queries.append(make_query(CaptionedImageItem(image, version.caption)))
            captions.append(self.spec.check_item(pair[0]).caption)
        image_order, text_order = shuffled(seed, number, len(queries), len(captions))
        images = in_sent_order(queries, image_order)
        texts = [captions[n] for n in text_order]
        return QueryBatch(images, texts, image_order, text_order, [], queries)

    def query(self, oracle: Any, batch: QueryBatch) -> object:
        """Embed the images and captions (one request; per shape when images differ)."""
        assert batch.images is not None
        texts = list(batch.texts)
        if isinstance(batch.images, np.ndarray):
            return oracle.embed_image_text(np.ascontiguousarray(batch.images), texts)
        captions = _image_text_answer(oracle.embed_image_text(None, texts))
        images = by_shape(
            batch.images,
            lambda group: EmbeddingAnswer(
                _image_text_answer(oracle.embed_image_text(group, [])).images
            ),
            EmbeddingAnswer.concatenate,
            lambda answer, index: EmbeddingAnswer(answer.embeddings[index]),
            lambda shape: oracle.queries_per_request(shape, "embed-image-text"),
        )
        return ImageTextAnswer(images.embeddings, captions.texts)

    def validate(
        self, info: OracleInfo, batch: QueryBatch, answer: ImageTextAnswer
    ) -> ImageTextAnswer:
        """Check both matrices and their common dimension."""
        return answer.validate(len(batch.image_order), len(batch.text_order))

    def in_order(self, batch: QueryBatch, answer: ImageTextAnswer) -> ImageTextAnswer:
        """Return the image and caption embeddings in the unshuffled order."""
        return ImageTextAnswer(
            answer.images[unshuffle(batch.image_order)], answer.texts[unshuffle(batch.text_order)]
        )

    def score_pair(
        self,
        info: OracleInfo,
        batch: QueryBatch,
        answer: ImageTextAnswer,
        j: int,
        pair: tuple[Item, Item],
    ) -> tuple[dict[str, Value], list[float]]:
        """Score each version by the cosine of its image's and its caption's embeddings."""
        pair_images = np.ascontiguousarray(answer.images[2 * j : 2 * j + 2])
        caption = np.ascontiguousarray(answer.texts[j : j + 1])
        fields: dict[str, Value] = {
            **self.item_fields(batch, j, pair),
            "answers": {
                "images": matrix_to_value(pair_images),
                "caption": matrix_to_value(caption),
            },
        }
        return fields, [score(pair_images[v], caption[0]) for v in (0, 1)]

    def item_fields(self, batch: QueryBatch, j: int, pair: tuple[Item, Item]) -> dict[str, Value]:
        """Return the pair's ``shape`` and ``query_digests``."""
        first = self.spec.check_item(pair[0])
        return {"shape": image_shape_value(first.image), "query_digests": query_digests(batch, j)}

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


def _image_text_answer(answer: object) -> ImageTextAnswer:
    """Return ``answer`` if the oracle answered an :class:`ImageTextAnswer`, else raise."""
    if not isinstance(answer, ImageTextAnswer):
        what = type(answer).__name__
        raise OracleError("invalid-answer", f"the oracle answered a {what}, not an ImageTextAnswer")
    return answer
