"""The arbiter's escrow registry (spec draft §9): durable log, checkpoints, claims, gRPC service.

- :mod:`.store`: the interfaces (:class:`~.store.EscrowLog`, :class:`~.store.ClaimStore`,
  both in one :class:`~.store.EscrowStore`) and the typed records they return;
- :mod:`.sql`: the SQL database both backends share (connection, transactions, schema),
  through the :mod:`.cursor` protocol;
- :mod:`.escrow_log`: the escrow log on it (group commit, the head's frontier, checkpoints);
- :mod:`.log_tables`: the log's rows (entries, the root index, the tree's nodes), each
  read or written in O(log n) rows;
- :mod:`.log_check`: the full check of every row of the log (``verifier store-check``);
- :mod:`.claim_store`: the claim store on it (state, transcripts, verdicts, leases);
- :mod:`.sql_store`: both behind one :class:`~.sql_store.SqlEscrowStore`;
- :mod:`.sqlite_store` and :mod:`.postgres_store`: the backends;
- :mod:`.leases`: the renewal of the claim leases a verifier process holds;
- :mod:`.service`: the ``twinaudit.escrow.v1.Escrow`` gRPC servicer.
"""
