"""Benchmarks: ``python -m bench [NAME ...]`` (see :mod:`bench.__main__`).

Like the ``twinaudit`` command line, benchmarks run torch with OpenMP's passive wait
policy unless ``OMP_WAIT_POLICY`` is set (it must be set before torch is imported).
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
