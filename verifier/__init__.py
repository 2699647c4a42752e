"""twinaudit verifier side (see README)."""
