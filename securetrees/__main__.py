"""``python -m securetrees``: the same as the ``securetrees`` command."""

import sys

from securetrees.cli import main

sys.exit(main())
