"""Helpers shared by tests: tiny models, synthetic twin-marked data (torch lives here only)."""
