"""The twinaudit specification: tools that build its test vectors."""
