"""Every cost the web app shows says where it comes from: the us-east-1 on-demand list price
(components/config/catalogue.py), and for a stack elsewhere, that it is not that region's price."""

from __future__ import annotations

from tests.web.support import AUTH, create, login, text_of


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
