"""``python -m twinaudit`` runs the console script."""

import sys

from .cli import main

sys.exit(main())
