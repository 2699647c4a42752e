"""Model oracles: the audited model as a black box the verifier queries.

- :mod:`verifier.oracles.base` — :class:`ClassifierOracle`, :class:`OracleInfo`,
  :class:`ClassifyAnswer` (numpy only);
- :mod:`verifier.oracles.torch_oracle` — an in-process adapter for a ``torch.nn.Module``
  (imports torch; import it explicitly);
- :mod:`verifier.oracles.grpc_server` / :mod:`verifier.oracles.grpc_client` — any
  oracle served as, or reached through, ``twinaudit.oracle.v1.Oracle``.
"""

from .base import ClassifierOracle, ClassifyAnswer, OracleInfo, check_images

__all__ = ["ClassifierOracle", "ClassifyAnswer", "OracleInfo", "check_images"]
