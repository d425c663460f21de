"""An offline deployment shows nothing invented as real (issue 29 §2): every value the plan made up
(the load balancer's name, the image digest, the zone, the metrics addresses) carries the one
placeholder label wherever the page or the API shows it, and no command is offered against it."""

from __future__ import annotations

import re

import pytest

from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render.outputs import offline_placeholders
from tests.web.support import AUTH, create, login, text_of, wait_for_job
from webui.deployments.views import connect_info, placeholders_of

INVENTED = {"endpoint.url", "image", "imageProvenance.digest", "availabilityZone",
            "observability.grafanaUrl", "observability.prometheusUrl"}


@pytest.fixture
def planned(client):
    login(client)
    create(client, "offline")
    job = wait_for_job(client, client.post("/api/v1/deployments/offline/up", headers=AUTH).get_json()["job"])
    assert job["status"] == "succeeded", job
    return client


def _value(outputs, path):
    for part in path.split("."):
        outputs = outputs[part]
    return outputs


@pytest.mark.slow
def test_the_api_lists_the_made_up_outputs_and_offers_no_curl_for_the_made_up_endpoint(planned):
    detail = planned.get("/api/v1/deployments/offline", headers=AUTH).get_json()
    assert set(detail["placeholders"]) == INVENTED
    connect = detail["connect"]
    assert connect["externalUrl"] == detail["outputs"]["endpoint"]["url"]
    assert connect["externalUrlPlaceholder"] == detail["placeholders"]["endpoint.url"]
    assert "externalCurl" not in connect


@pytest.mark.slow
def test_every_made_up_value_on_the_page_is_labelled_and_none_is_in_a_command(planned):
    detail = planned.get("/api/v1/deployments/offline", headers=AUTH).get_json()
    page = text_of(planned.get("/deployments/offline"))
    assert 'id="external-curl"' not in page and 'id="connect-offline"' in page
    host = re.match(r"https?://([^/]+)/v1$", detail["outputs"]["endpoint"]["url"]).group(1)
    # The zone is left out here: the plan's subnets are named after the zones it assumed (the
    # Offline assumptions note says so); its output row is labelled below.
    made_up = sorted(INVENTED - {"endpoint.url", "availabilityZone"})
    invented = [host] + [_value(detail["outputs"], path) for path in made_up]
    # The RayService manifest names the metrics Services as Ray's settings (what KubeRay gets), not
    # as addresses to visit; left out too.
    page = re.sub(r'(id="rayservice-yaml">).*?(</pre>)', r"\1\2", page, flags=re.S)
    (zone_row,) = [line for line in page.splitlines() if 'data-output="availabilityZone"' in line]
    assert 'data-placeholder="availabilityZone"' in zone_row
    for value in invented:
        lines = [line for line in page.splitlines() if value in line]
        assert lines, value
        for line in lines:  # each row or paragraph that shows it says it is a placeholder
            assert 'class="badge badge-warn placeholder-mark"' in line, (value, line[:300])
            assert "<pre" not in line and "curl" not in line, (value, line[:300])


def test_a_real_deployment_has_no_placeholders_and_keeps_its_curl():
    reference_spec = DeploymentSpec.from_config({}, "dev")
    plan = plan_deployment(reference_spec)
    outputs = {"endpoint": {"url": "http://k8s-real.elb.us-east-2.amazonaws.com/v1", "scope": "vpc",
                            "auth": "apiKey"}, "availabilityZone": "us-east-2a"}
    assert placeholders_of("pulumi", plan, outputs) == {}
    assert offline_placeholders(reference_spec, outputs)  # the same outputs, offline, would be labelled
    connect = connect_info(plan, outputs, placeholders_of("pulumi", plan, outputs))
    assert "externalCurl" in connect and "externalUrlPlaceholder" not in connect
