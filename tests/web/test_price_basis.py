"""Every cost the web app shows says where it comes from: the us-east-1 on-demand list price
(components/config/catalogue.py), and for a stack elsewhere, that it is not that region's price."""

from __future__ import annotations

import re

import pytest

from components.config import catalogue
from tests.web.support import AUTH, create, login, text_of, wait_for_job


def test_api_summary_names_the_price_basis(client):
    create(client, "east", {"aws:region": "us-east-1"})
    create(client, "europe", {"aws:region": "eu-west-1"})
    east = client.get("/api/v1/deployments/east", headers=AUTH).get_json()["summary"]
    europe = client.get("/api/v1/deployments/europe", headers=AUTH).get_json()["summary"]
    assert east["priceBasis"].startswith("us-east-1 on-demand list price")
    assert "eu-west-1" not in east["priceBasis"]
    assert europe["priceBasis"].startswith("us-east-1 on-demand list price")
    assert "this is not eu-west-1's" in europe["priceBasis"]


def test_pages_say_a_cost_outside_us_east_1_is_the_us_east_1_list_price(client):
    create(client, "europe", {"aws:region": "eu-west-1"})
    login(client)
    page = text_of(client.get("/deployments/europe"))
    assert "Estimated cost" in page and "this is not eu-west-1's" in page
    listing = text_of(client.get("/"))
    assert "us-east-1 list price" in listing
    form = text_of(client.get("/deployments/new"))
    assert "/h in us-east-1" in form  # the instance-type choices' prices


# ---- issue 29 §2: totals read as totals, rates as rates, and the basis is said once a page ----

@pytest.fixture
def previewed(client):
    """A deployment in eu-west-1 with a pending engine-restarting change, previewed: the page with
    every cost it can show (head, pending changes, both strategies, summary, node groups)."""
    login(client)
    create(client, "europe", {"aws:region": "eu-west-1"})
    assert wait_for_job(client, client.post("/api/v1/deployments/europe/up", headers=AUTH).get_json()["job"])[
        "status"] == "succeeded"
    client.patch("/api/v1/deployments/europe", json={"config": {"raypd:model": {"maxModelLen": 8192}}}, headers=AUTH)
    job = wait_for_job(client, client.post("/api/v1/deployments/europe/preview", headers=AUTH).get_json()["job"])
    return job, text_of(client.get(f"/deployments/europe?job={job['id']}"))


@pytest.mark.slow
def test_the_deployment_page_says_the_price_basis_once(previewed):
    _, page = previewed
    basis = catalogue.price_basis("eu-west-1")
    outputs = re.search(r'<section class="card" id="outputs">.*?</section>', page, flags=re.S).group(0)
    # The outputs table shows the stack's estimatedCostBasis output as data; everywhere else, once.
    assert page.replace(outputs, "").count(basis) == 1
    assert re.search(r'id="price-basis">Prices on this page: ' + re.escape(basis), page)


@pytest.mark.slow
def test_an_extra_cost_is_a_total_over_its_minutes_not_a_rate(previewed):
    job, page = previewed
    zero = next(c for c in job["summary"]["assessment"]["choices"] if c["name"] == "newCluster")
    assert zero["extraUsd"] > 0
    row = re.search(r'<tr data-strategy="newCluster">.*?</tr>', page, flags=re.S).group(0)
    cell = re.search(r'<td class="extra-cost">(.*?)</td>', row).group(1)
    assert cell == f"${zero['extraUsd']:.2f} over ~{round(zero['extraSeconds'] / 60)} min"
    in_place = re.search(r'<tr data-strategy="inPlace">.*?</tr>', page, flags=re.S).group(0)
    assert '<td class="extra-cost">none</td>' in in_place
    # Rates stay rates: the deployment's cost per hour.
    assert re.search(r'id="new-cost">\$[0-9.,]+/h<', page)
