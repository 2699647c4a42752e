"""The twinaudit command-line interface."""
