"""The deployment page shows the digest the image was pinned to (issue 17 §3)."""

from __future__ import annotations

import pytest

from components.stack.mockrun import OFFLINE_IMAGE_DIGEST
from tests.web.support import extract_csrf, form_defaults, login, text_of, wait_for_job


@pytest.fixture
def browser(client):
    login(client)
    return client


def launch(browser, name: str, image: str = "") -> str:
    page = text_of(browser.get("/deployments/new"))
    values = form_defaults(page) | {"name": name, "csrf_token": extract_csrf(page), "action": "launch"}
    if image:
        values["raypd:image"] = image
    response = browser.post("/deployments/new", data=values)
    assert response.status_code == 302, text_of(response)[:500]
    job_id = response.headers["Location"].split("job=")[1]
    assert wait_for_job(browser, job_id, headers={})["status"] == "succeeded"
    return text_of(browser.get(f"/deployments/{name}"))


@pytest.mark.slow
def test_the_planned_digest_is_shown_and_called_a_placeholder(browser):
    page = launch(browser, "pinned")
    assert 'id="image-digest"' in page
    assert OFFLINE_IMAGE_DIGEST in page
    assert 'data-placeholder="imageProvenance.digest"' in page and "no registry was asked" in page


def test_an_image_raypd_cannot_pin_says_so(browser):
    page = launch(browser, "unpinned", "public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda")
    assert "not pinned: the nodes pull public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda by tag" in page
