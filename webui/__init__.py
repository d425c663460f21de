"""raypd web app: launch, inspect and tear down PD deployments from a browser (Contract 4).

`create_app(settings)` builds the Flask app; `python -m webui` serves it.
"""

from webui.app import close_app, create_app
from webui.settings import Settings

__all__ = ["Settings", "close_app", "create_app"]
