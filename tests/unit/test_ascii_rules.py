"""Numbers, ARNs and names are ASCII wherever they reach AWS, Kubernetes or the Hub (issue 29 §3).

Python's `re` reads `\\d` as any Unicode digit and `\\w` as any Unicode letter, and `int()` reads
"٢٩" as 29: "1.٢٩" passed the Kubernetes version rule (as 1.29, which is past EKS's support and
refused when written in ASCII), Arabic-Indic account numbers passed the ARN rules and a Cyrillic
letter passed the repo id rule. Every pattern in components/ is compiled through
components.config.rules.ascii_pattern; the last tests hold every module to it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from components.config.errors import SpecError
from components.config.spec import DeploymentSpec

COMPONENTS = Path(__file__).resolve().parents[2] / "components"
CERT = "arn:aws:acm:us-east-2:123456789012:certificate/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
ARABIC_ACCOUNT = "١٢٣٤٥٦٧٨٩٠١٢"  # 123456789012 in Arabic-Indic digits

HOSTILE: dict[str, tuple[dict[str, Any], str]] = {
    "k8s-arabic-indic-minor": ({"raypd:kubernetesVersion": "1.٢٩"}, "raypd:kubernetesVersion"),
    "k8s-full-width-minor": ({"raypd:kubernetesVersion": "1.３５"}, "raypd:kubernetesVersion"),
    "k8s-leading-zero": ({"raypd:kubernetesVersion": "1.035"}, "raypd:kubernetesVersion"),
    "ray-arabic-indic": ({"raypd:rayVersion": "٢.٥٨.٠"}, "raypd:rayVersion"),
    "ray-leading-zero": ({"raypd:rayVersion": "2.058.0"}, "raypd:rayVersion"),
    "kuberay-full-width": ({"raypd:kuberayVersion": "１.4.0"}, "raypd:kuberayVersion"),
    "role-arn-arabic-account": ({"raypd:adminRoleArns": [f"arn:aws:iam::{ARABIC_ACCOUNT}:role/ci"]},
                                "raypd:adminRoleArns[0]"),
    "role-arn-unicode-name": ({"raypd:adminRoleArns": ["arn:aws:iam::123456789012:role/dévops"]},
                              "raypd:adminRoleArns[0]"),
    "hub-repo-cyrillic": ({"raypd:model": {"source": "Qwen/Qwen3.5-9Б"}}, "raypd:model.source"),
    "hub-org-cyrillic-e": ({"raypd:model": {"source": "Qw\u0435n/Qwen3.5-9B"}}, "raypd:model.source"),
    "s3-prefix-cyrillic": ({"raypd:model": {"source": "s3://raypd-weights/модель/"}}, "raypd:model.source"),
    "s3-prefix-iam-wildcard": ({"raypd:model": {"source": "s3://raypd-weights/*"}}, "raypd:model.source"),
    "image-arabic-port": ({"raypd:image": "registry.example.com:٥٠٠٠/ray:2.58.0"}, "raypd:image"),
    "cert-arabic-account": ({"raypd:endpoint": {"certificateArn": CERT.replace("123456789012", ARABIC_ACCOUNT)}},
                            "raypd:endpoint.certificateArn"),
    "cert-arabic-region-digit": ({"raypd:endpoint": {"certificateArn": CERT.replace("us-east-2", "us-east-٢")}},
                                 "raypd:endpoint.certificateArn"),
}


@pytest.mark.parametrize("strict", [False, True], ids=["stack-file", "json-api"])
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_non_ascii_digits_and_letters_are_refused_naming_the_key(name: str, strict: bool) -> None:
    config, field = HOSTILE[name]
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config(config, "dev", strict=strict)
    assert field in [error.field for error in caught.value.errors], caught.value


@pytest.mark.parametrize("config", [
    {"raypd:kubernetesVersion": "1.34"},
    {"raypd:rayVersion": "2.58.0", "raypd:kuberayVersion": "1.4.0"},
    {"raypd:adminRoleArns": ["arn:aws:iam::123456789012:role/ci/deploy+bot=1,a.b@c_d-e"]},
    {"raypd:model": {"source": "s3://raypd-weights/qwen3.5-9b/v1_(final)/"}},
    {"raypd:image": "registry.example.com:5000/ray:2.58.0"},
    {"raypd:endpoint": {"scope": "internet", "certificateArn": CERT}},
], ids=["k8s", "versions", "role-arn", "s3", "image-port", "cert"])
def test_the_ascii_forms_are_accepted(config: dict[str, Any]) -> None:
    DeploymentSpec.from_config(config, "dev", strict=True)


# ---- every pattern in components/ is ASCII ----

_UNICODE_CLASSES = re.compile(r"\\[dDwWsSb]")


def _flag_names(node: ast.expr) -> set[str]:
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def unicode_patterns(source: str) -> list[str]:
    """`re` calls whose literal pattern uses \\d \\w \\s \\b (or their negations) without re.ASCII."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                and node.func.attr in ("compile", "match", "fullmatch", "search", "findall", "finditer",
                                       "sub", "split")):
            continue
        literals = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        flags = set().union(*(_flag_names(a) for a in [*node.args[1:], *(k.value for k in node.keywords)]))
        if any(_UNICODE_CLASSES.search(text) for text in literals) and not flags & {"ASCII", "A"}:
            found.append(f"line {node.lineno}: {literals[0]!r}")
    return found


def test_no_module_of_components_matches_unicode_digits_or_letters() -> None:
    offenders = {str(path.relative_to(COMPONENTS)): hits for path in sorted(COMPONENTS.rglob("*.py"))
                 if (hits := unicode_patterns(path.read_text()))}
    assert offenders == {}, "compile patterns with components.config.rules.ascii_pattern"


def test_the_pattern_rule_finds_a_planted_unicode_pattern() -> None:
    planted = 'import re\n_ACCOUNT = re.compile(r"\\d{12}")\nOK = re.compile(r"\\d+", re.ASCII)\n'
    assert unicode_patterns(planted) == ["line 2: '\\\\d{12}'"]
    assert unicode_patterns('import re\nre.fullmatch(r"[0-9]{12}", x)\n') == []
