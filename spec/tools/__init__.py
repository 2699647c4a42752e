"""Builders of the spec test vectors (run ``python -m spec.tools.<builder>``)."""
