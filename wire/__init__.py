"""The wire layer: the generated gRPC code and the plumbing every service and client shares.

- ``twinaudit.wire.escrow.v1``, ``twinaudit.wire.verifier.v1``, ``twinaudit.wire.oracle.v1``:
  the modules generated from ``proto/twinaudit/<service>/v1/<service>.proto`` (wire
  packages ``twinaudit.<service>.v1``), and ``twinaudit.wire.oip.v2``, the Open Inference
  Protocol's (package ``inference``); regenerate them with ``python proto/generate.py``.
- :mod:`twinaudit.wire.transport`: message-size limits, deadlines, TLS credentials, the health
  service and the mapping from the protocol's errors to gRPC status codes.
- :mod:`twinaudit.wire.observe`: one log event per RPC and the servers' metrics.
- :mod:`twinaudit.wire.claim_start`: a claim's parameters to and from ``ClaimStart``;
  :mod:`twinaudit.wire.openings`: a request's openings split into messages and
  reassembled.
- :mod:`twinaudit.wire.http_call` and :mod:`twinaudit.wire.json_reply`: an outbound HTTP
  call with a whole-call deadline and a byte cap, and its JSON reply read event by event
  (the arbiter's OIP client and the practitioner's OpenAI adapter).
- :mod:`twinaudit.wire.torchvision_shim`: imports torchvision (and so ``transformers``) on
  the CPU torch, for the owner's extractors and text models and the practitioner's
  Hugging Face oracles alike; the only module here that imports torch, and only when
  imported.
- :mod:`twinaudit.wire.torchvision_hook`: the same fix for code outside the project (a user's
  ``from transformers import …``), installed into an environment as a ``.pth`` file.

It stands on ``twinaudit.protocol`` alone; the roles (``owner``, ``verifier``,
``practitioner``) and the CLI (``twinaudit.cli``) stand on it (``docs/architecture.md``).
"""
