"""The Benchmark, Resilience and Conformance tabs send requests to a deployment's endpoint, so each
refuses a REAL deployment that does not serve: created or previewed but never deployed. The tabs'
own tests all start from a deployed one (or an offline plan), so a `serving` that said yes to
everything stayed green in all of them; these are the mixed cases.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.support import AUTH, create, login, text_of, wait_for_job

# (API path, a body the tab would accept on a serving deployment, page path, the page's notice id)
TABS: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "benchmark": ("benchmarks", {"rates": [1]}, "benchmark", "benchmark-unavailable"),
    "resilience": ("resilience", {"fault": "decode-pod", "confirm": "idle"}, "resilience", "resilience-unavailable"),
    "conformance": ("conformance", {}, "conformance", "conformance-unavailable"),
}


def _refuses(client: Any, tab: str, status: str) -> None:
    api_path, body, page_path, notice = TABS[tab]
    refused = client.post(f"/api/v1/deployments/idle/{api_path}", json=body, headers=AUTH)
    assert refused.status_code == 409, (tab, refused.get_json())
    answer = refused.get_json()
    assert f"idle is {status}, not deployed" in str(answer), (tab, answer)
    assert not [j for j in client.get("/api/v1/deployments/idle", headers=AUTH).get_json()["jobs"]
                if j["operation"] == tab], "a refused tab started a job"
    page = text_of(client.get(f"/deployments/idle/{page_path}"))
    assert f'id="{notice}"' in page and f"idle is {status}, not deployed" in page, tab


@pytest.mark.parametrize("tab", sorted(TABS))
def test_a_real_deployment_never_deployed_is_refused_by_every_tab(fake_app, tab):
    client = fake_app.test_client()
    create(client, "idle")
    login(client)
    _refuses(client, tab, "created")


@pytest.mark.parametrize("tab", sorted(TABS))
def test_a_previewed_deployment_is_refused_by_every_tab_and_a_deployed_one_is_not(fake_app, tab):
    client = fake_app.test_client()
    create(client, "idle")
    job = client.post("/api/v1/deployments/idle/preview", headers=AUTH).get_json()["job"]
    assert wait_for_job(client, job)["status"] == "succeeded"
    login(client)
    _refuses(client, tab, "previewed")
    job = client.post("/api/v1/deployments/idle/up", headers=AUTH).get_json()["job"]
    assert wait_for_job(client, job)["status"] == "succeeded"
    _, _, page_path, notice = TABS[tab]
    assert f'id="{notice}"' not in text_of(client.get(f"/deployments/idle/{page_path}"))
