"""`python -m components.preflight`: the checks to run before `pulumi up` (components/preflight/cli.py)."""

import sys

from components.preflight.cli import main

sys.exit(main())
