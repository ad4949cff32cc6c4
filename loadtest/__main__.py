"""``python -m loadtest``: see loadtest/cli.py."""

import sys

from loadtest.cli import main

sys.exit(main())
