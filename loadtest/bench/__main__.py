"""``python -m loadtest.bench``: the command line in ``loadtest.bench.cli``."""

import sys

from loadtest.bench.cli import main

sys.exit(main())
