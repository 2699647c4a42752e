"""An MLServer custom runtime: a tiny numpy image classifier or encoder (tests only).

Loaded by the MLServer process that :mod:`tests.support.oip_server` starts, never by
the test process: importing :mod:`mlserver` registers its own ``inference.*``
protobuf messages, the names that :mod:`twinaudit.wire.oip.v2` also registers.

The model is a memoriser: the logit of class ``c`` for an image ``x`` is
``log Σ exp(−‖x − t_j‖² / τ)`` over the training images ``t_j`` labelled ``c`` (a
kernel classifier, which is what a model trained to 100% accuracy on a few items
does to them). Its file is an ``.npz`` with ``images`` (N, H, W, C) in [0, 1],
``labels`` (N,) and ``tau``. ``parameters.extra`` of the model settings say how it
answers: ``answers`` ``probabilities`` (softmax), ``logits``, ``labels`` (the top
class, INT64) or ``embedding`` (the logits, as an image encoder's embedding),
``dtype`` ``float64`` or ``float32`` for floating answers, and ``layout`` ``nhwc``,
``nchw`` or ``flat`` for the input tensor. ``fail_first`` makes the first
``fail_first`` inference requests raise (MLServer then answers HTTP 500), to exercise
the client's retries.
"""

from __future__ import annotations

import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse

from tests.support.oip_server import memoriser_logits


class Memoriser(MLModel):  # type: ignore[misc]
    """Serve the memoriser of the model file at ``parameters.uri``."""

    async def load(self) -> bool:
        """Read the model file and the answer settings."""
        params = self.settings.parameters
        data = np.load(params.uri)
        self._train = data["images"].reshape(data["images"].shape[0], -1).astype(np.float64)
        self._labels = data["labels"].astype(np.int64)
        self._tau = float(data["tau"])
        self._shape = tuple(int(s) for s in data["images"].shape[1:])
        extra = params.extra or {}
        self._answers = extra.get("answers", "probabilities")
        self._dtype = np.dtype(extra.get("dtype", "float64"))
        self._layout = extra.get("layout", "nhwc")
        self._fail = int(extra.get("fail_first", 0))
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        """Answer one batch of images."""
        if self._fail > 0:
            self._fail -= 1
            raise RuntimeError("transient failure (test)")
        x = NumpyCodec.decode_input(payload.inputs[0]).astype(np.float64)
        if self._layout == "nchw":
            x = x.transpose(0, 2, 3, 1)
        x = x.reshape(x.shape[0], -1)
        logits = memoriser_logits(x, self._train, self._labels, self._tau)
        if self._answers == "labels":
            out = logits.argmax(1).astype(np.int64)
        elif self._answers == "probabilities":
            e = np.exp(logits - logits.max(1, keepdims=True))
            out = (e / e.sum(1, keepdims=True)).astype(self._dtype)
        else:
            out = logits.astype(self._dtype)
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            outputs=[NumpyCodec.encode_output(name=self._answers, payload=out)],
        )
