"""`raypd:observability`: whether a deployment gets its metrics stack, and how much it keeps.

```yaml
raypd:observability:
  enabled: true                 # false: no metrics stack, no PodMonitors, no dcgm-exporter
  prometheusStorageSize: 50Gi   # Prometheus's volume
  prometheusRetention: 15d      # how long samples are kept
  grafanaStorageSize: 10Gi      # Grafana's volume (its database)
```

On by default: a deployment whose GPUs nobody can see is one nobody can tune (issue 18). The
sizes are the PersistentVolumeClaims' requests (EBS gp3 volumes, components.stack.observability_stack);
`prometheusRetention` is Prometheus's `--storage.tsdb.retention.time`. Defaults live in components.config.defaults.
"""

from __future__ import annotations

from pydantic import field_validator

from components.config import defaults
from components.config.rules import SpecModel, ascii_pattern

OBSERVABILITY_KEY = "raypd:observability"
# Whole GiB or TiB: what an EBS volume is sized in (a "50G" or "1.5Ti" would be rounded by EBS).
_SIZE = ascii_pattern(r"([1-9][0-9]{0,5})(Gi|Ti)")
# Prometheus durations as its flag takes them (a number and one unit; Prometheus docs,
# "Configuration", <duration>), limited to the units that make sense for keeping data.
_RETENTION = ascii_pattern(r"([1-9][0-9]{0,4})(h|d|w|y)")
MIN_PROMETHEUS_GIB = 10
MAX_VOLUME_GIB = 16 * 1024  # an EBS gp3 volume's ceiling (16 TiB)


def size_gib(size: str) -> int:
    """A validated size ("50Gi", "1Ti") in GiB."""
    match = _SIZE.fullmatch(size)
    if match is None:
        raise ValueError(f"not a size: {size!r}")
    number = int(match.group(1))
    return number * 1024 if match.group(2) == "Ti" else number


def _size(value: str, minimum: int) -> str:
    if not isinstance(value, str) or not _SIZE.fullmatch(value):
        raise ValueError(f"{value!r} is not a volume size such as \"50Gi\" or \"1Ti\" "
                         "(a whole number of GiB or TiB)")
    gib = size_gib(value)
    if not minimum <= gib <= MAX_VOLUME_GIB:
        raise ValueError(f"{value} is outside {minimum}Gi..16Ti (an EBS gp3 volume's range, and "
                         "room for a day of samples)")
    return value


class ObservabilitySpec(SpecModel):
    """One level of keys, as every other block (the web form shows each as one field)."""

    enabled: bool = defaults.OBSERVABILITY_ENABLED
    prometheus_storage_size: str = defaults.PROMETHEUS_STORAGE
    prometheus_retention: str = defaults.PROMETHEUS_RETENTION
    grafana_storage_size: str = defaults.GRAFANA_STORAGE

    @field_validator("prometheus_storage_size")
    @classmethod
    def _prometheus_storage(cls, value: str) -> str:
        return _size(value, MIN_PROMETHEUS_GIB)

    @field_validator("grafana_storage_size")
    @classmethod
    def _grafana_storage(cls, value: str) -> str:
        return _size(value, 1)

    @field_validator("prometheus_retention")
    @classmethod
    def _retention(cls, value: str) -> str:
        if not isinstance(value, str) or not _RETENTION.fullmatch(value):
            raise ValueError(f"{value!r} is not a retention such as \"15d\", \"2w\" or \"48h\" "
                             "(a whole number and one of h, d, w, y)")
        return value

    @property
    def prometheus_retention_size(self) -> str:
        """Prometheus's size limit, 85% of the volume: it drops the oldest blocks before the
        volume fills (a full volume stops ingestion: Prometheus "Storage", operational aspects)."""
        return f"{size_gib(self.prometheus_storage_size) * 85 // 100}GiB"

    def public(self) -> dict[str, object]:
        """Contract 1 form (camelCase keys)."""
        return self.model_dump(by_alias=True)
