"""``python -m twinaudit`` runs the console script."""

import sys

from twinaudit.cli.main import main

sys.exit(main())
