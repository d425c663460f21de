"""What the views (pages, API) use to read deployments and their jobs, so that no view holds the
store itself (issue 16 §4; tests/unit/test_webui_layout.py keeps it so). This first step holds the
job and event reads; the commands and job bodies still live in webui/service.py."""
