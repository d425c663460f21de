"""dcgm-exporter loads raypd's counters (issue 29 §1): what the exporter's DaemonSet runs with
raypd's Helm values, and that the exporter can read every line of raypd's counters file.

helm is not available here, so the DaemonSet is derived from the pinned chart's own rules,
NVIDIA/dcgm-exporter tag 4.5.3-4.8.2 (commit 691c9276, chart 4.8.2):
- Helm merges the values raypd passes over the chart's values.yaml (tests/fixtures/charts/
  dcgm-exporter-4.8.2-values.yaml): maps merge key by key, lists and scalars replace;
- deployment/templates/daemonset.yaml: the exporter container's `args` are `.Values.arguments`,
  one per line (`{{- range $.Values.arguments }} - {{ . }}`), plus the debug-dump flags only with
  `debugDump.enabled`; the pod's volumes are `pod-gpu-resources` then `.Values.extraConfigMapVolumes`
  as they are (`toYaml`); the container mounts `pod-gpu-resources` then `.Values.extraVolumeMounts`;
  `automountServiceAccountToken` is `enablePodLabels or enablePodUID (with rbac.create) or DRA`;
- deployment/templates/metrics-configmap.yaml: ConfigMap `exporter-metrics-config-map`, key
  `metrics` = `.Values.customMetrics`.
And the exporter (same tag): without `-m`, `counters.GetCounterSet` reads the `-f` file
(internal/pkg/counters/counter_config.go `ReadCSVFile`: Go's encoding/csv, `Comment = '#'`); any
error there ends the process (pkg/cmd/app.go: `os.Exit(1)`), so a bad line means no GPU metrics
at all. With `-m`, it reads the ConfigMap through the Kubernetes API, which needs the service
account token the chart does not mount here: the same exit.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from components.render.observability import DCGM_FIELDS, dcgm_exporter_values

CHART_VALUES = Path(__file__).resolve().parents[1] / "fixtures" / "charts" / "dcgm-exporter-4.8.2-values.yaml"
CHART_CONFIG_MAP = "exporter-metrics-config-map"  # metrics-configmap.yaml's fixed name
# internal/pkg/counters/variables.go promMetricType
PROM_TYPES = {"gauge", "counter", "histogram", "summary", "label"}


@lru_cache(maxsize=1)
def chart_values() -> dict[str, Any]:
    return yaml.safe_load(CHART_VALUES.read_text(encoding="utf-8"))


def helm_merge(defaults: Any, overrides: Any) -> Any:
    """Helm's coalescing of user values over a chart's: maps merge, anything else replaces."""
    if isinstance(defaults, dict) and isinstance(overrides, dict):
        merged = copy.deepcopy(defaults)
        for key, value in overrides.items():
            merged[key] = helm_merge(defaults.get(key), value)
        return merged
    return copy.deepcopy(overrides)


def exporter_pod(values: dict[str, Any]) -> dict[str, Any]:
    """The parts of daemonset.yaml's pod this test reads, for merged `values`."""
    container: dict[str, Any] = {
        "args": [str(arg) for arg in values["arguments"]],
        "volumeMounts": [{"name": "pod-gpu-resources", "readOnly": True,
                          "mountPath": "/var/lib/kubelet/pod-resources"},
                         *(values.get("extraVolumeMounts") or [])],
    }
    if values["debugDump"]["enabled"]:
        container["args"] += ["--dump-enabled"]
    kube = values["kubernetes"]
    return {
        "automountServiceAccountToken": bool(
            ((kube["enablePodLabels"] or kube["enablePodUID"]) and kube["rbac"]["create"])
            or values["kubernetesDRA"]["enabled"]),
        "annotations": dict(values.get("podAnnotations") or {}),
        "volumes": [{"name": "pod-gpu-resources", "hostPath": {"path": values["kubeletPath"]}},
                    *(values.get("extraConfigMapVolumes") or [])],
        "container": container,
    }


def rendered() -> tuple[dict[str, Any], dict[str, str]]:
    """(the exporter's pod, the metrics ConfigMap's data) with the values raypd passes."""
    values = helm_merge(chart_values(), dcgm_exporter_values())
    return exporter_pod(values), {"metrics": values.get("customMetrics", "")}


def file_read_by_the_exporter(pod: dict[str, Any], config_map: dict[str, str]) -> str:
    """The counters file the exporter reads: `-f`'s path, which must be a file of the chart's
    metrics ConfigMap mounted into the container (else the image's own default list)."""
    args = pod["container"]["args"]
    assert "-m" not in args and not any(a.startswith("--configmap-data") for a in args), (
        "-m reads the ConfigMap through the API: the pod has no token "
        f"(automountServiceAccountToken {pod['automountServiceAccountToken']}) and the exporter exits")
    path = args[args.index("-f") + 1]
    (mount,) = [m for m in pod["container"]["volumeMounts"] if m["mountPath"] == path]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == CHART_CONFIG_MAP
    (item,) = [i for i in volume["configMap"]["items"] if i["path"] == mount["subPath"]]
    return config_map[item["key"]]


def go_csv_records(text: str) -> list[list[str]]:
    """Go's encoding/csv as ReadCSVFile sets it up: lines starting with '#' and empty lines are
    skipped; FieldsPerRecord 0 means every record must have as many fields as the first; no
    LazyQuotes (a '"' inside a field is an error). Raises ValueError where Go returns an error."""
    records: list[list[str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line or line.startswith("#"):
            continue
        if '"' in line:
            raise ValueError(f'line {number}: bare " in non-quoted field')
        record = line.split(",")
        if records and len(record) != len(records[0]):
            raise ValueError(f"record on line {number}: wrong number of fields")
        records.append(record)
    return records


def extract_counters(records: list[list[str]]) -> list[tuple[str, str, str]]:
    """counters.ExtractCounters' checks: three fields each (trimmed), a known Prometheus type."""
    counters = []
    for record in records:
        fields = [field.strip(" ") for field in record]
        if len(fields) != 3:
            raise ValueError(f"malformed CSV record {record}: expected 3 fields")
        if fields[1] not in PROM_TYPES:
            raise ValueError(f"could not find Prometheus metric type '{fields[1]}'")
        counters.append((fields[0], fields[1], fields[2]))
    return counters


def test_the_exporter_reads_raypds_counters_file_and_no_other():
    pod, config_map = rendered()
    assert file_read_by_the_exporter(pod, config_map) == dcgm_exporter_values()["customMetrics"]


def test_the_exporter_can_read_every_line_and_gets_every_field_raypd_lists():
    pod, config_map = rendered()
    counters = extract_counters(go_csv_records(file_read_by_the_exporter(pod, config_map)))
    assert [(name, kind) for name, kind, _ in counters] == [(f, k) for f, k, _ in DCGM_FIELDS]
    # What docs/observability.md promises beyond the chart's own default list.
    assert {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_NVLINK_TX_BYTES",
            "DCGM_FI_PROF_NVLINK_RX_BYTES"} <= {name for name, _, _ in counters}


def test_the_go_csv_reading_refuses_what_the_exporter_refuses():
    """The reader above is as strict as the exporter's: a comma in a help text is a fourth field."""
    good = "# comment\nDCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n\n"
    assert extract_counters(go_csv_records(good)) == [
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).")]
    for bad in ("A, gauge, x\nB, gauge, busy or idle, in %\n", 'A, gauge, "x"\n',
                "A, gauges, x\n", "A, gauge, x, y\n"):
        try:
            extract_counters(go_csv_records(bad))
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_a_new_counters_list_rolls_the_exporter_pods():
    """A subPath-mounted ConfigMap never changes in a running container, and the exporter reads
    the file once at start: the pod template must change with the list."""
    pod, _ = rendered()
    (annotation,) = pod["annotations"].values()
    other = dcgm_exporter_values(DCGM_FIELDS[:-1])
    assert other["customMetrics"] != dcgm_exporter_values()["customMetrics"]
    assert list(other["podAnnotations"].values()) != [annotation]
