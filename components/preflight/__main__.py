"""`python -m components.preflight`: the checks to run before `pulumi up` (components/preflight/run.py)."""

import sys

from components.preflight.run import main

sys.exit(main())
