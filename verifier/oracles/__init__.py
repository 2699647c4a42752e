"""The arbiter's clients of a model oracle: how the verifier reaches the audited model.

The interfaces they implement (:class:`~twinaudit.protocol.oracles.base.ClassifierOracle`
and the others) live in :mod:`twinaudit.protocol.oracles`, below both the verifier and the
practitioner's serving code (:mod:`twinaudit.practitioner`), which implements them too.

- :mod:`twinaudit.verifier.oracles.grpc_client` (with :mod:`.grpc_replies` and
  :mod:`.proto_reader`) — any oracle reached through ``twinaudit.oracle.v1.Oracle``;
- :mod:`twinaudit.verifier.oracles.oip_oracle` (with :mod:`.oip_address`,
  :mod:`.oip_tensors`, :mod:`.oip_transport`) — a classifier or encoder on an Open
  Inference Protocol (KServe v2) server, REST or gRPC;
- :mod:`twinaudit.verifier.oracles.dial` — whichever oracle an address names;
- :mod:`twinaudit.verifier.oracles.held` (with :mod:`.sandbox` and
  :mod:`.artefact_limits`) — a model the arbiter holds, served by ``twinaudit oracle
  serve`` in a sandboxed child process, so that its code never runs in the arbiter's
  process.
"""
