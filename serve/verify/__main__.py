"""`python -m serve.verify`: the CLI (its flags, output and exit codes: serve/verify/__init__.py)."""

import sys

from serve.verify import main

sys.exit(main())
