"""twinaudit owner side (see README)."""
