"""Sequential tests for data-use detection (spec §7).

- :mod:`.paper_test` — the paper's PPRM confidence sequence with a Chernoff threshold
  (``pprm-chernoff``), with :mod:`.pprm` and :mod:`.chernoff` underneath.
- :mod:`.base` — decisions, step records, indicators, tie rules, the shared state.
"""

from .chernoff import chernoff_threshold
from .pprm import pprm_interval

__all__ = ["chernoff_threshold", "pprm_interval"]
