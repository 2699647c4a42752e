"""The Debian Fashion-MNIST (package dataset-fashion-mnist) that tests train on, and their mark.

``needs_data`` skips a test where the package is not installed.
"""

from __future__ import annotations

from typing import Final

import pytest

from demo.data import DEBIAN_DIR

#: Where the Debian package installs the data set.
DEBIAN: Final = DEBIAN_DIR
needs_data: Final = pytest.mark.skipif(not DEBIAN.is_dir(), reason="needs the Debian Fashion-MNIST")
