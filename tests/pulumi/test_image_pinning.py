"""The image pinned at deploy time, under the mock runtime: ECR is asked for the DLC tag's digest
and every Ray pod (and the rollout check) runs `<repository>@sha256:...`."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi.runtime import mocks

from components.config import defaults
from components.config.errors import SpecError
from components.config.spec import DeploymentSpec
from components.render.outputs import validate_outputs
from components.stack.mockrun import OFFLINE_IMAGE_DIGEST, PlanMocks, run_program
from components.stack.program import build

REAL_LOOKING = "sha256:" + "3c" * 32


class EcrMocks(PlanMocks):
    """PlanMocks whose ECR answers are scripted; records what was asked."""

    def __init__(self, region: str, answer: Any):
        super().__init__(region)
        self.answer = answer
        self.asked: list[dict[str, Any]] = []

    def call(self, args: mocks.MockCallArgs) -> dict[str, Any]:  # type: ignore[override]
        if args.token == "aws:ecr/getImage:getImage":
            self.asked.append(dict(args.args))
            if isinstance(self.answer, Exception):
                # How a provider's error reaches the program: a failed invoke, which the SDK
                # raises as Exception("invoke of <token> failed: <reason> (<property>)").
                return {}, [("", str(self.answer))]  # type: ignore[return-value]
            return {"id": "x", "imageDigest": self.answer}
        return super().call(args)


def run(spec: DeploymentSpec, mock: PlanMocks):
    return run_program(lambda: build(spec), project="raypd", stack="dev", region=spec.region, mock=mock)


def images(run_result) -> list[str]:
    found = []
    for resource in run_result.resources:
        if resource.type == "kubernetes:ray.io/v1:RayService":
            config = resource.inputs["spec"]["rayClusterConfig"]
            for template in [config["headGroupSpec"]["template"]] + [
                    g["template"] for g in config["workerGroupSpecs"]]:
                found += [c["image"] for c in template["spec"]["containers"]]
        if resource.inputs.get("kind") == "Job":
            found += [c["image"] for c in resource.inputs["spec"]["template"]["spec"]["containers"]]
    return found


def test_every_ray_pod_runs_the_digest_ecr_gave_for_the_dlc_tag():
    spec = DeploymentSpec()
    mock = EcrMocks(spec.region, REAL_LOOKING)
    result = run(spec, mock)
    assert mock.asked and mock.asked[0]["registryId"] == "763104351884"
    assert mock.asked[0]["repositoryName"] == "ray"
    assert mock.asked[0]["imageTag"] == "serve-llm-cuda-v1.0"
    assert mock.asked[0]["region"] == spec.region
    found = images(result)
    assert len(found) >= 3  # head, a worker group, the rollout check
    assert set(found) == {f"763104351884.dkr.ecr.us-east-2.amazonaws.com/ray@{REAL_LOOKING}"}
    provenance = result.outputs["imageProvenance"].value
    assert provenance == {"reference": defaults.dlc_image(spec.region), "digest": REAL_LOOKING}
    assert result.outputs["image"].value == found[0]


def test_the_offline_plan_pins_to_a_digest_no_image_has(reference_plan):
    outputs = reference_plan.outputs
    assert outputs["imageProvenance"]["digest"] == OFFLINE_IMAGE_DIGEST
    assert outputs["image"].endswith("@" + OFFLINE_IMAGE_DIGEST)
    validate_outputs({**outputs, "kubeconfig": "x"})


def test_a_missing_tag_stops_the_program_before_anything_is_created():
    spec = DeploymentSpec.from_config({"raypd:image": "123456789012.dkr.ecr.us-east-2.amazonaws.com/ray:nope"})
    mock = EcrMocks(spec.region, Exception(
        "ImageNotFoundException: The image with imageId {imageTag:'nope'} does not exist"))
    with pytest.raises(SpecError) as caught:
        run(spec, mock)
    assert caught.value.errors[0].field == "raypd:image"


def test_a_refused_lookup_deploys_the_tag_and_says_nodes_may_differ():
    spec = DeploymentSpec()
    mock = EcrMocks(spec.region, Exception("AccessDeniedException: not authorized"))
    result = run(spec, mock)
    assert set(images(result)) == {defaults.dlc_image(spec.region)}
    assert result.outputs["imageProvenance"].value["digest"] is None


def test_an_image_pinned_in_the_config_is_not_looked_up():
    pinned = "example.com/team/ray@" + REAL_LOOKING
    spec = DeploymentSpec.from_config({"raypd:image": pinned})
    mock = EcrMocks(spec.region, AssertionError("must not be asked"))
    result = run(spec, mock)
    assert not mock.asked
    assert set(images(result)) == {pinned}
