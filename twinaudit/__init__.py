"""twinaudit: verifiable third-party audits of ML data use.

One installed root for the project's packages, by role:

- :mod:`twinaudit.protocol` — the protocol core (spec/): encoding, commitments, Merkle
  trees, the PRG, the sequential tests, claims, verdicts and the oracle interfaces;
- :mod:`twinaudit.wire` — the generated gRPC code and the transport every service shares;
- :mod:`twinaudit.owner` — the data owner: marking, vault, escrow, publication, claims;
- :mod:`twinaudit.verifier` — the arbiter: escrow log, claim engine, signing, replay;
- :mod:`twinaudit.practitioner` — the practitioner: serving a model as an oracle;
- :mod:`twinaudit.cli` — the ``twinaudit`` command.

In the repository each role is a top-level folder; ``twinaudit/<role>`` is a link to it
(docs/architecture.md says why).
"""
