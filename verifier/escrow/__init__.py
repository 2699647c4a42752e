"""The arbiter's escrow registry (spec draft §9): durable log, checkpoints, claims, gRPC service.

- :mod:`.store`: the :class:`~.store.EscrowStore` interface;
- :mod:`.sql_store`: the SQL core both backends share (group commit, log rebuild);
- :mod:`.sqlite_store` and :mod:`.postgres_store`: the backends;
- :mod:`.service`: the ``twinaudit.escrow.v1.Escrow`` gRPC servicer.
"""
