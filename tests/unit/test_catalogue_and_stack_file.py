"""The instance catalogue's facts and the stack-file reader's handling of encrypted values."""

from __future__ import annotations

import pytest

from components.config import catalogue
from components.config.errors import SpecError
from components.config.stack_file import SECRET_PLACEHOLDER, load_stack_file, stack_name_from_path


@pytest.mark.parametrize("family", ["g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en"])
def test_catalogue_covers_the_gpu_families(family):
    assert any(t.family == family and t.gpus > 0 for t in catalogue.CATALOGUE.values())


def test_efa_support_matches_ec2_facts():
    assert not catalogue.CATALOGUE["g5.xlarge"].efa_supported
    assert catalogue.CATALOGUE["g6.8xlarge"].max_efa_interfaces == 1
    assert catalogue.CATALOGUE["p5.48xlarge"].max_efa_interfaces == 32


def test_quota_codes_follow_the_family():
    assert catalogue.CATALOGUE["g6.8xlarge"].quota_code == "L-DB2E81BA"
    assert catalogue.CATALOGUE["p5.48xlarge"].quota_code == "L-417A185B"


def test_secure_values_become_placeholders(tmp_path):
    file = tmp_path / "Pulumi.prod.yaml"
    file.write_text("config:\n  aws:region: us-west-2\n  raypd:hfToken:\n    secure: v1:abc:CIPHERTEXT\n")
    values, secret_keys = load_stack_file(file)
    assert values == {"aws:region": "us-west-2", "raypd:hfToken": SECRET_PLACEHOLDER}
    assert secret_keys == {"raypd:hfToken"}
    assert stack_name_from_path(file) == "prod"


@pytest.mark.parametrize("text", ["config: [1, 2", "- a list\n", "config: 3\n"])
def test_unreadable_stack_files_are_spec_errors(tmp_path, text):
    file = tmp_path / "Pulumi.x.yaml"
    file.write_text(text)
    with pytest.raises(SpecError):
        load_stack_file(file)


def test_missing_stack_file_names_the_path(tmp_path):
    with pytest.raises(SpecError) as caught:
        load_stack_file(tmp_path / "nope.yaml")
    assert "nope.yaml" in caught.value.errors[0].message
