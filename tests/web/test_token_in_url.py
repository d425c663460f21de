"""A token sent in a URL is refused, and it is not carried on: not into the login redirect's
`next=`, not into the login page, not into the redirect after logging in, not into an answer."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from tests.web.support import TOKEN
from webui.security import safe_next


def _next_of(location: str) -> str:
    values = parse_qs(urlsplit(location).query).get("next", [])
    return values[0] if values else ""


@pytest.mark.parametrize("query", [
    f"token={TOKEN}",
    f"TOKEN={TOKEN}",
    f"access_token={TOKEN}",
    f"%74oken={quote(TOKEN)}",  # an encoded name is the same name
    f"job=abc&token={TOKEN}&runs=1",
])
def test_a_page_asked_for_with_a_token_in_its_url_redirects_to_login_without_it(client, query):
    response = client.get(f"/deployments/demo?{query}")
    assert response.status_code == 302
    location = response.headers["Location"]
    assert TOKEN not in location and quote(TOKEN) not in location
    assert urlsplit(location).path == "/login"
    target = _next_of(location)
    assert target.startswith("/deployments/demo")
    # the other parameters are kept, in their order
    if "job=abc" in query:
        assert target == "/deployments/demo?job=abc&runs=1"


def test_the_login_page_and_the_redirect_after_login_drop_a_token_in_next(client):
    page = client.get("/login", query_string={"next": f"/?job=1&token={TOKEN}"})
    assert page.status_code == 200
    assert TOKEN not in page.get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.get_data(as_text=True)).group(1)
    response = client.post("/login", data={
        "csrf_token": csrf, "token": TOKEN, "next": f"/?job=1&access_token={TOKEN}",
    })
    assert response.status_code == 302
    assert response.headers["Location"] == "/?job=1"


def test_an_api_call_with_a_token_in_its_url_is_refused_and_the_answer_does_not_echo_it(client):
    response = client.get(f"/api/v1/deployments?token={TOKEN}")
    assert response.status_code == 401
    assert TOKEN not in response.get_data(as_text=True)
    assert all(TOKEN not in value for _, value in response.headers.items())


@pytest.mark.parametrize("target,expected", [
    ("/a?token=x", "/a"),
    ("/a?token=x#frag", "/a#frag"),
    ("/a?b=1&token", "/a?b=1"),  # a bare name is dropped too
    ("/a?tokens=1&b=token", "/a?tokens=1&b=token"),  # only a parameter *named* token goes
    ("/a?b=%20x&c=+", "/a?b=%20x&c=+"),  # what stays is byte for byte what was asked
    ("/a?api_key=k&password=p&bearer=t&auth=a", "/a"),
])
def test_safe_next_drops_credential_parameters_and_keeps_the_rest_as_sent(target, expected):
    assert safe_next(target) == expected
