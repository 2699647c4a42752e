"""The arbiter's side: the escrow log, the claim engine, signing, verdicts and replay.

- :mod:`.server` and :mod:`.service` — the gRPC services (escrow and claims), with
  :mod:`.escrow` (the append-only log and its stores, SQLite or PostgreSQL);
- :mod:`.claim` — a claim's session: order, windows, openings checked against the
  escrowed root, queries, scores, the sequential test, the transcript; with
  :mod:`.windows` and :mod:`.scoring` (each score function's queries and scores);
- :mod:`.oracles` — the clients it queries a model with, a held model run in a sandbox;
- :mod:`.signer_process` and :mod:`.signing` — the key kept in a process of its own;
- :mod:`.verdict`, :mod:`.replay` and :mod:`.reexecute` — checking a verdict and
  replaying it from its transcript (or re-running a held model).

It imports neither the owner's code nor the practitioner's, nor torch
(docs/architecture.md).
"""
