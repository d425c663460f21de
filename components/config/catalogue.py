"""The instance-type catalogue: the one place raypd knows EC2 hardware facts.

Validation, node-group sizing, cost estimates and the web UI all read this table, so a fact about an
instance type is written exactly once. Figures come from EC2 DescribeInstanceTypes (as recorded in
moto 5.2.5) and the public on-demand price list for us-east-1 (Linux, shared tenancy; PRICE_*
below, which every cost raypd shows names through `price_basis`); see docs/catalogue.md. At deploy
time AWS's own API is authoritative (preflight asks it again).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Optional

# Service Quotas codes for "Running On-Demand <family> instances" (counted in vCPUs).
QUOTA_G_AND_VT = "L-DB2E81BA"
QUOTA_P = "L-417A185B"
QUOTA_STANDARD = "L-1216C47A"


@dataclass(frozen=True)
class InstanceType:
    name: str
    gpus: int
    gpu_model: Optional[str]
    gpu_memory_gib: float
    vcpus: int
    memory_gib: int
    max_efa_interfaces: int
    usd_per_hour: Optional[float]  # on-demand, us-east-1; None where no public price was found

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def efa_supported(self) -> bool:
        return self.max_efa_interfaces > 0

    @property
    def quota_code(self) -> str:
        if self.family.startswith("p"):
            return QUOTA_P
        if self.family.startswith("g"):
            return QUOTA_G_AND_VT
        return QUOTA_STANDARD


def _gpu(
    name: str, gpus: int, model: str, mem: float, vcpus: int, ram: int, efa: int, usd: Optional[float],
) -> InstanceType:
    return InstanceType(name, gpus, model, mem, vcpus, ram, efa, usd)


def _cpu(name: str, vcpus: int, ram: int, usd: float) -> InstanceType:
    return InstanceType(name, 0, None, 0.0, vcpus, ram, 0, usd)


_A10G, _L4, _L40S = 22.35, 22.35, 44.7

_TYPES: tuple[InstanceType, ...] = (
    _gpu("g5.xlarge", 1, "A10G", _A10G, 4, 16, 0, 1.006),
    _gpu("g5.2xlarge", 1, "A10G", _A10G, 8, 32, 0, 1.212),
    _gpu("g5.4xlarge", 1, "A10G", _A10G, 16, 64, 0, 1.624),
    _gpu("g5.8xlarge", 1, "A10G", _A10G, 32, 128, 1, 2.448),
    _gpu("g5.12xlarge", 4, "A10G", _A10G, 48, 192, 1, 5.672),
    _gpu("g5.16xlarge", 1, "A10G", _A10G, 64, 256, 1, 4.096),
    _gpu("g5.24xlarge", 4, "A10G", _A10G, 96, 384, 1, 8.144),
    _gpu("g5.48xlarge", 8, "A10G", _A10G, 192, 768, 1, 16.288),
    _gpu("g6.xlarge", 1, "L4", _L4, 4, 16, 0, 0.8048),
    _gpu("g6.2xlarge", 1, "L4", _L4, 8, 32, 0, 0.9776),
    _gpu("g6.4xlarge", 1, "L4", _L4, 16, 64, 0, 1.3232),
    _gpu("g6.8xlarge", 1, "L4", _L4, 32, 128, 1, 2.0144),
    _gpu("g6.12xlarge", 4, "L4", _L4, 48, 192, 1, 4.6016),
    _gpu("g6.16xlarge", 1, "L4", _L4, 64, 256, 1, 3.3968),
    _gpu("g6.24xlarge", 4, "L4", _L4, 96, 384, 1, 6.6752),
    _gpu("g6.48xlarge", 8, "L4", _L4, 192, 768, 1, 13.3504),
    _gpu("g6e.xlarge", 1, "L40S", _L40S, 4, 32, 0, 1.861),
    _gpu("g6e.2xlarge", 1, "L40S", _L40S, 8, 64, 0, 2.24208),
    _gpu("g6e.4xlarge", 1, "L40S", _L40S, 16, 128, 0, 3.00424),
    _gpu("g6e.8xlarge", 1, "L40S", _L40S, 32, 256, 1, 4.52856),
    _gpu("g6e.12xlarge", 4, "L40S", _L40S, 48, 384, 1, 10.49264),
    _gpu("g6e.16xlarge", 1, "L40S", _L40S, 64, 512, 1, 7.57719),
    _gpu("g6e.24xlarge", 4, "L40S", _L40S, 96, 768, 2, 15.06559),
    _gpu("g6e.48xlarge", 8, "L40S", _L40S, 192, 1536, 4, 30.13118),
    _gpu("p4d.24xlarge", 8, "A100", 40.0, 96, 1152, 4, 21.957642),
    _gpu("p4de.24xlarge", 8, "A100", 80.0, 96, 1152, 4, 27.44705),
    _gpu("p5.4xlarge", 1, "H100", 80.0, 16, 256, 1, 6.88),
    _gpu("p5.48xlarge", 8, "H100", 80.0, 192, 2048, 32, 55.04),
    _gpu("p5e.48xlarge", 8, "H200", 141.0, 192, 2048, 32, None),
    _gpu("p5en.48xlarge", 8, "H200", 141.0, 192, 2048, 16, 63.296),
    _gpu("p6-b200.48xlarge", 8, "B200", 179.06, 192, 2048, 8, 113.9328),
    # CPU types for the system node group (KubeRay operator, Ray head, cluster add-ons).
    _cpu("m7i.large", 2, 8, 0.1008),
    _cpu("m7i.xlarge", 4, 16, 0.2016),
    _cpu("m7i.2xlarge", 8, 32, 0.4032),
    _cpu("m7i.4xlarge", 16, 64, 0.8064),
    _cpu("m6i.xlarge", 4, 16, 0.192),
    _cpu("m6i.2xlarge", 8, 32, 0.384),
    _cpu("m5.xlarge", 4, 16, 0.192),
    _cpu("m5.2xlarge", 8, 32, 0.384),
)

CATALOGUE: dict[str, InstanceType] = {t.name: t for t in _TYPES}


def lookup(name: str) -> Optional[InstanceType]:
    return CATALOGUE.get(name)


def gpu_instance_types() -> list[InstanceType]:
    return [t for t in _TYPES if t.gpus > 0]


# Longer than any instance type name: not quoted back (nor matched) whole.
MAX_QUOTED_NAME = 40
# A name this many edits (or fewer) from a known one is a typo of it.
TYPO_EDITS = 2


def _edits(a: str, b: str) -> int:
    """Levenshtein distance: the insertions, deletions and substitutions between a and b."""
    row = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, other in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (char != other))
    return row[-1]


def close_gpu_types(name: str) -> list[str]:
    """The GPU types `name` is most likely a typo of, best first: the nearest by edits when some
    are at most TYPO_EDITS away (g6.8xlarg: only g6.8xlarge), else difflib's close matches."""
    wanted = name.strip().lower()
    names = [t.name for t in gpu_instance_types()]
    distance = {known: _edits(wanted, known) for known in names}
    nearest = min(distance.values())
    if nearest <= TYPO_EDITS:
        return [known for known in names if distance[known] == nearest][:3]
    return difflib.get_close_matches(wanted, names, n=3, cutoff=0.75)


def gpu_type_problem(name: str) -> Optional[str]:
    """Why `name` cannot be a serving phase's instance type (None when it is a GPU type of the
    catalogue). A typo gets the names it is nearest to ("did you mean g6.8xlarge?"), not the whole
    catalogue; a CPU type is said to be one."""
    known = lookup(name)
    if known is not None and known.gpus > 0:
        return None
    if known is not None:
        return (f"'{name}' is not a GPU instance type: it has no GPU (it suits raypd:systemNodes); "
                "pick one such as g6.8xlarge (the catalogue: docs/catalogue.md)")
    if len(name) > MAX_QUOTED_NAME:
        return f"is {len(name)} characters long, not an EC2 instance type name (e.g. g6.8xlarge)"
    close = close_gpu_types(name)
    if close:
        named = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
        return f"'{name}' is not a GPU instance type raypd knows; did you mean {named}?"
    names = ", ".join(t.name for t in gpu_instance_types())
    return f"'{name}' is not a GPU instance type raypd knows; known: {names}"


# Fixed hourly charges of every raypd stack (us-east-1 list prices).
EKS_CONTROL_PLANE_USD_PER_HOUR = 0.10
NAT_GATEWAY_USD_PER_HOUR = 0.045

# ElastiCache for Valkey on-demand node prices (us-east-1, USD per node-hour), for the Ray GCS's
# Redis (issue 31, raypd:faultTolerance.gcs elasticache): AWS's ElastiCache pricing page lists the
# Redis OSS node price (cache.t4g.micro $0.016, small $0.032, medium $0.065) and prices Valkey nodes
# 20% below it; these are those Valkey figures. A node type not listed is left unpriced.
CACHE_NODE_USD_PER_HOUR: dict[str, float] = {
    "cache.t4g.micro": 0.0128, "cache.t4g.small": 0.0256, "cache.t4g.medium": 0.052,
}

# Where every price above comes from: one region's on-demand list price, at one date. Every cost
# raypd shows says so (price_basis), so a figure is never taken for another region's bill.
PRICE_REGION = "us-east-1"
PRICE_AS_OF = "July 2026"
PRICE_SOURCE = ("AWS Price List on-demand list prices, Linux, shared tenancy, as published in "
                "Karpenter's generated price file")


def price_basis(region: str) -> str:
    """Where the cost figures for a stack in `region` come from, in words people read next to them."""
    basis = f"{PRICE_REGION} on-demand list price, {PRICE_AS_OF}"
    if region == PRICE_REGION:
        return basis
    return f"{basis}; {region} prices differ, this is not {region}'s"


# EFA line rate (Gbit/s): the instance's network bandwidth, which its EFA interfaces share (EC2's
# accelerated-computing specifications, "Network bandwidth"). The dashboard draws the KV handoff's
# NIXL throughput against it; types without EFA are absent. A separate table, not an InstanceType
# field, so the catalogue's rows stay as DescribeInstanceTypes recorded them.
EFA_LINE_RATE_GBPS: dict[str, float] = {
    "g5.8xlarge": 25, "g5.12xlarge": 40, "g5.16xlarge": 25, "g5.24xlarge": 50, "g5.48xlarge": 100,
    "g6.8xlarge": 25, "g6.12xlarge": 40, "g6.16xlarge": 25, "g6.24xlarge": 50, "g6.48xlarge": 100,
    "g6e.8xlarge": 25, "g6e.12xlarge": 100, "g6e.16xlarge": 35, "g6e.24xlarge": 200,
    "g6e.48xlarge": 400,
    "p4d.24xlarge": 400, "p4de.24xlarge": 400, "p5.4xlarge": 100, "p5.48xlarge": 3200,
    "p5e.48xlarge": 3200, "p5en.48xlarge": 3200, "p6-b200.48xlarge": 3200,
}


def efa_line_rate_gbps(name: str) -> Optional[float]:
    """The EFA line rate of an instance type in Gbit/s; None without EFA (or not on record)."""
    return EFA_LINE_RATE_GBPS.get(name)
