"""`python -m harness` is the `bugmatrix` command."""

import sys

from harness.cli import main

sys.exit(main())
