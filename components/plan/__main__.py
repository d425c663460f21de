"""`python -m components.plan`: the offline plan, under the name the README and the web app use.

The plan is made by running the Pulumi program under the mock runtime, so it lives with the program
(components/stack/offline_plan.py); this entry point only keeps the documented command.
"""

import sys

from components.stack.offline_plan import main

sys.exit(main())
