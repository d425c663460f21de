"""`python -m components.changes`: prints the settings table docs/infrastructure.md embeds."""

import argparse

from components.changes.docs_table import settings_table

argparse.ArgumentParser(
    prog="python -m components.changes",
    description="Print the Markdown table of what a change of each setting does to a running deployment "
                "(downtime, extra capacity, the zero-downtime choice), as docs/infrastructure.md embeds it.",
).parse_args()
print(settings_table(), end="")
