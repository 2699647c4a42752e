"""The witness role: cosigning the arbiter's checkpoints (C2SP ``tlog-witness``, spec §9.7).

``twinaudit witness serve`` runs this package. A witness is configured with the logs it
watches (each an origin and its note key) and keeps, per origin, the last checkpoint it
cosigned; it cosigns a new checkpoint only with a consistency proof from that one, so
that no two inconsistent views of one log both carry its cosignature.

- :mod:`.state` — the per-origin state in SQLite, advanced by compare-and-swap;
- :mod:`.cosigner` — the add-checkpoint checks and the answer (status and body);
- :mod:`.server` — the HTTP service, with byte caps, timeouts and bounded concurrency.

It imports only :mod:`twinaudit.protocol` (import contract ``roles``).
"""
