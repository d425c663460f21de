"""The raypd Pulumi program (`pulumi up` runs this file; so does the web app's Automation API).

Stack config -> DeploymentSpec (validated once) -> components -> stack outputs. All the work is in
components/stack/program.py, so the offline plan (`python -m components.plan`) runs the same code.
"""

from components.stack.program import main

main()
