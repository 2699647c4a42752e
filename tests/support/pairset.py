"""Committed pairs in memory, now public in :mod:`demo.pairset` (re-exported here)."""

from demo.pairset import PairSet

__all__ = ["PairSet"]
