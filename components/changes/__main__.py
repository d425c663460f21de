"""`python -m components.changes`: prints the settings table docs/infrastructure.md embeds."""

from components.changes.assess import settings_table

print(settings_table(), end="")
