"""Playwright's `expect` waits PATIENCE_S here, not its 5 s default.

A browser context's default timeout (patient_context) covers clicks, fills and navigations, but
Playwright's assertions keep their own default of 5 s (playwright/sync_api `expect.set_options`):
on CI's busy 2-core machine a job's page update came later than that and failed a test whose
feature worked. One home for the wait: tests/patience.py.
"""

from __future__ import annotations

from playwright.sync_api import expect

from tests.patience import PATIENCE_S

expect.set_options(timeout=PATIENCE_S * 1000)
