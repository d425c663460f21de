"""Behind a load balancer the throttle counts per client, not per balancer, and X-Forwarded-For is
believed only from RAYPD_TRUSTED_PROXIES.

The server tests run `python -m webui` (waitress, configured as users get it) on 127.0.0.1 and
speak to it from two loopback source addresses: 127.0.0.2 is the trusted proxy, 127.0.0.3 an
untrusted client that sends the header itself (Linux routes all of 127/8 to loopback).
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator, Optional

import pytest

from tests.patience import PATIENCE_S
from tests.web.support import TOKEN, settings_for
from webui.security import TrustedProxies, forwarded_client
from webui.settings import SettingsError, parse_trusted_proxies

PROJECT = Path(__file__).resolve().parents[2]
PROXY = "127.0.0.2"
OTHER_PROXIES = "10.1.0.0/16"  # a second tier of balancers, seen only in X-Forwarded-For
UNTRUSTED = "127.0.0.3"
LIMIT = 10  # webui.security.LOGIN_ATTEMPTS_PER_MINUTE


def _nets(value: str) -> tuple:
    return parse_trusted_proxies(value)


# ---- the rule, as a pure function ----

@pytest.mark.parametrize("peer,header,expected", [
    ("127.0.0.2", "198.51.100.7", "198.51.100.7"),
    ("127.0.0.2", "203.0.113.1, 198.51.100.7", "198.51.100.7"),  # the client's own entries are not believed
    ("127.0.0.2", "198.51.100.7, 10.1.2.3", "198.51.100.7"),  # a trusted hop is skipped
    ("127.0.0.2", "10.1.9.9, 10.1.2.3", "10.1.9.9"),  # every hop trusted: the left-most
    ("127.0.0.2", "", "127.0.0.2"),  # no header: the proxy itself
    ("127.0.0.2", "unknown", "127.0.0.2"),  # nothing usable: the last hop vouched for
    ("127.0.0.2", "198.51.100.7, garbage", "127.0.0.2"),
    ("127.0.0.2", "garbage, 198.51.100.7", "198.51.100.7"),
    ("127.0.0.2", "198.51.100.7:4711", "198.51.100.7"),
    ("127.0.0.2", '"[2001:db8::7]:4711"', "2001:db8::7"),
    ("127.0.0.2", "2001:db8::7", "2001:db8::7"),
    ("::ffff:127.0.0.2", "198.51.100.7", "198.51.100.7"),  # a dual-stack socket's view of the proxy
    ("127.0.0.3", "198.51.100.7", "127.0.0.3"),  # not a trusted peer: the header is ignored
    ("127.0.0.3", "127.0.0.2", "127.0.0.3"),
])
def test_the_client_is_the_right_most_hop_not_a_trusted_proxy(peer, header, expected):
    assert forwarded_client(peer, header, _nets(f"{PROXY}, {OTHER_PROXIES}")) == expected


def test_without_trusted_proxies_the_header_is_believed_from_no_one():
    assert forwarded_client("127.0.0.2", "198.51.100.7", ()) == "127.0.0.2"


def test_the_middleware_replaces_remote_addr_and_removes_every_forwarding_header():
    seen: dict = {}

    def app(environ, start_response):
        seen.update(environ)
        return [b""]

    headers = {"HTTP_X_FORWARDED_FOR": "198.51.100.7", "HTTP_X_FORWARDED_HOST": "evil.example",
               "HTTP_X_FORWARDED_PROTO": "https", "HTTP_X_FORWARDED_PORT": "443",
               "HTTP_X_FORWARDED_BY": "x", "HTTP_FORWARDED": "for=203.0.113.1"}
    middleware = TrustedProxies(app, _nets(PROXY))
    middleware({"REMOTE_ADDR": PROXY, **headers}, None)
    assert seen["REMOTE_ADDR"] == "198.51.100.7" and seen["raypd.proxy_peer"] == PROXY
    assert not set(headers) & set(seen)
    seen.clear()
    middleware({"REMOTE_ADDR": UNTRUSTED, **headers}, None)
    assert seen["REMOTE_ADDR"] == UNTRUSTED and "raypd.proxy_peer" not in seen
    assert not set(headers) & set(seen)


# ---- the setting ----

def test_the_setting_accepts_addresses_and_cidrs_separated_by_commas_or_spaces(tmp_path):
    settings = settings_for(tmp_path / "home", RAYPD_TRUSTED_PROXIES=" 10.0.0.0/16,127.0.0.2  fd00::/8 ")
    assert settings.trusted_proxies == (ipaddress.ip_network("10.0.0.0/16"),
                                        ipaddress.ip_network("127.0.0.2/32"),
                                        ipaddress.ip_network("fd00::/8"))
    assert settings_for(tmp_path / "home").trusted_proxies == ()


@pytest.mark.parametrize("value,message", [
    ("lb.internal", "lb.internal is not an IP address or CIDR"),
    ("10.0.0.5/8", "10.0.0.5/8 has host bits set"),
    ("10.0.0.0/33", "is not an IP address or CIDR"),
    ("0.0.0.0/0", "would trust every address"),
    ("::/0", "would trust every address"),
    ("10.0.0.1; rm -rf /", "is not an IP address or CIDR"),
    ("10.0.0.1\x00\x85", "is not an IP address or CIDR"),
    ("\ud800", "is not an IP address or CIDR"),
    ("9" * 100_000, "is not an IP address or CIDR"),
])
def test_a_bad_trusted_proxy_is_refused_naming_the_setting(tmp_path, value, message):
    with pytest.raises(SettingsError) as caught:
        settings_for(tmp_path / "home", RAYPD_TRUSTED_PROXIES=value)
    text = str(caught.value)
    assert text.startswith("RAYPD_TRUSTED_PROXIES: ") and message in text
    assert len(text) < 300 and text.isprintable()


def test_the_server_refuses_to_start_with_a_bad_trusted_proxy(tmp_path):
    environment = {**os.environ, "RAYPD_HOME": str(tmp_path / "home"), "RAYPD_ENGINE": "offline",
                   "RAYPD_TRUSTED_PROXIES": "10.0.0.0/8, lb.internal"}
    result = subprocess.run([sys.executable, "-m", "webui", "--port", "1"], cwd=PROJECT, env=environment,
                            capture_output=True, text=True, timeout=PATIENCE_S)
    assert result.returncode == 2
    assert "error: RAYPD_TRUSTED_PROXIES: lb.internal is not an IP address or CIDR" in result.stderr
    assert "Traceback" not in result.stderr


# ---- the real server ----

class Served:
    def __init__(self, process: subprocess.Popen, port: int):
        self.process = process
        self.port = port
        self.output: list[str] = []
        self._lock = threading.Lock()
        for stream in (process.stdout, process.stderr):
            threading.Thread(target=self._collect, args=(stream,), daemon=True).start()

    def _collect(self, stream) -> None:
        for line in stream:
            with self._lock:
                self.output.append(line)

    def text(self) -> str:
        with self._lock:
            return "".join(self.output)

    def request(self, source: str, path: str, headers: Optional[dict] = None,
                method: str = "GET", body: Optional[str] = None) -> http.client.HTTPResponse:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=PATIENCE_S,
                                                source_address=(source, 0))
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        response.body = response.read().decode("utf-8", "replace")  # type: ignore[attr-defined]
        connection.close()
        return response

    def bearer(self, source: str, token: str, forwarded_for: Optional[str] = None) -> int:
        headers = {"Authorization": f"Bearer {token}"}
        if forwarded_for is not None:
            headers["X-Forwarded-For"] = forwarded_for
        return self.request(source, "/api/v1/deployments", headers).status


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    for source in (PROXY, UNTRUSTED):
        with socket.socket() as sock:
            try:
                sock.bind((source, 0))
            except OSError as exc:
                pytest.skip(f"cannot send from loopback address {source} on this machine: {exc}")
    port = _free_port()
    environment = {**os.environ, "RAYPD_HOME": str(tmp_path_factory.mktemp("proxy") / "home"),
                   "RAYPD_ENGINE": "offline", "RAYPD_TOKEN": TOKEN,
                   "RAYPD_TRUSTED_PROXIES": f"{PROXY}, {OTHER_PROXIES}"}
    process = subprocess.Popen([sys.executable, "-m", "webui", "--port", str(port)], cwd=PROJECT,
                               env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server = Served(process, port)
    try:
        deadline = time.monotonic() + PATIENCE_S
        while True:
            try:
                if server.request("127.0.0.1", "/healthz").status == 200:
                    break
            except OSError:
                pass
            assert process.poll() is None, f"the server stopped: {server.text()}"
            assert time.monotonic() < deadline, f"the server did not answer: {server.text()}"
            time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        assert process.wait(timeout=PATIENCE_S) == 0
        assert TOKEN not in server.text()  # not printed, not logged (tokens in URLs below included)


def _lock_out(served: Served, source: str, forwarded_for) -> None:
    """LIMIT wrong tokens; `forwarded_for(i)` gives each one's header (None: no header)."""
    for attempt in range(LIMIT):
        assert served.bearer(source, "wrong-token-0123456789", forwarded_for(attempt)) == 401


def test_the_server_says_which_proxies_it_trusts(served):
    deadline = time.monotonic() + PATIENCE_S
    while "Trusted proxies" not in served.text():
        assert time.monotonic() < deadline, served.text()
        time.sleep(0.1)
    assert f"Trusted proxies (X-Forwarded-For believed from): {PROXY}/32, {OTHER_PROXIES}" in served.text()


def test_one_guesser_behind_the_proxy_does_not_lock_out_the_others(served):
    _lock_out(served, PROXY, lambda attempt: "198.51.100.7")
    assert served.bearer(PROXY, TOKEN, "198.51.100.7") == 429  # the guesser waits
    assert served.bearer(PROXY, TOKEN, "198.51.100.8") == 200  # someone else behind the same proxy
    assert served.bearer(PROXY, TOKEN, "203.0.113.5, 198.51.100.8") == 200


def test_a_guesser_behind_the_proxy_cannot_escape_by_inventing_hops(served):
    _lock_out(served, PROXY, lambda attempt: f"203.0.113.{attempt}, 198.51.100.20")
    assert served.bearer(PROXY, TOKEN, "203.0.113.99, 198.51.100.20") == 429
    assert served.bearer(PROXY, TOKEN, "198.51.100.20") == 429


def test_hops_through_a_second_trusted_tier_count_as_the_client_before_them(served):
    _lock_out(served, PROXY, lambda attempt: f"198.51.100.30, 10.1.{attempt}.1")
    assert served.bearer(PROXY, TOKEN, "198.51.100.30") == 429
    assert served.bearer(PROXY, TOKEN, "198.51.100.31, 10.1.0.1") == 200


def test_an_untrusted_peer_cannot_choose_its_address_with_the_header(served):
    _lock_out(served, UNTRUSTED, lambda attempt: f"198.51.100.{100 + attempt}")
    assert served.bearer(UNTRUSTED, TOKEN, "198.51.100.200") == 429
    assert served.bearer(UNTRUSTED, TOKEN) == 429
    # and its lock-out is its own: a client behind the proxy is not affected
    assert served.bearer(PROXY, TOKEN, "198.51.100.40") == 200


def test_the_login_form_throttles_and_audits_the_forwarded_client(served):
    client = "198.51.100.50"
    headers = {"X-Forwarded-For": client}
    page = served.request(PROXY, "/login", headers)
    cookie = page.getheader("Set-Cookie").split(";")[0]
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.body).group(1)
    form = {**headers, "Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"}
    statuses = [served.request(PROXY, "/login", form, "POST",
                               f"csrf_token={csrf}&next=%2F&token=wrong-token-0123456789").status
                for _ in range(LIMIT + 1)]
    assert statuses == [401] * LIMIT + [429]
    deadline = time.monotonic() + PATIENCE_S
    while f"anonymous@{client}" not in served.text():  # the audit line names the client, not the proxy
        assert time.monotonic() < deadline, served.text()
        time.sleep(0.1)
    assert f"anonymous@{PROXY}" not in served.text()
    # another client behind the proxy logs in
    other = {"X-Forwarded-For": "198.51.100.51"}
    page = served.request(PROXY, "/login", other)
    cookie = page.getheader("Set-Cookie").split(";")[0]
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.body).group(1)
    response = served.request(PROXY, "/login", {**other, "Cookie": cookie,
                                                "Content-Type": "application/x-www-form-urlencoded"},
                              "POST", f"csrf_token={csrf}&next=%2F&token={TOKEN}")
    assert response.status == 302 and response.getheader("Location") == "/"


def test_a_token_in_a_url_is_refused_by_the_real_server_and_not_carried_on(served):
    response = served.request(UNTRUSTED, f"/deployments?job=1&token={TOKEN}")
    assert response.status == 302
    assert TOKEN not in response.getheader("Location")
    assert "job%3D1" in response.getheader("Location")
    response = served.request(UNTRUSTED, f"/api/v1/deployments?token={TOKEN}")
    assert response.status == 401 and TOKEN not in response.body
