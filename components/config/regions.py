"""AWS regions as botocore knows them: which names are real, in which partition, and what is close.

`aws:region` is checked here at validation time, without credentials or network: botocore ships
its partition data (`botocore/data/partitions.json`, the file its endpoint rules resolve against),
so a typo such as `us-east-3` or `eu-west` is refused with the nearest real names before anything
asks AWS. A region newer than the installed botocore is not in that file; upgrading boto3 (pinned
in requirements.txt) brings it.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from typing import Optional

# Entries of partitions.json that are endpoint aliases, not regions (aws-global, aws-cn-global...).
_PSEUDO_SUFFIX = "-global"
MAX_QUOTED = 64


@lru_cache(maxsize=1)
def partitions() -> dict[str, tuple[str, ...]]:
    """Partition id -> its region names, sorted (botocore's bundled data; loaded once)."""
    from botocore.loaders import create_loader

    data = create_loader().load_data("partitions")
    return {
        partition["id"]: tuple(sorted(name for name in partition.get("regions", {})
                                      if not name.endswith(_PSEUDO_SUFFIX)))
        for partition in data["partitions"]
    }


def partition_of(region: str) -> Optional[str]:
    for partition, regions in partitions().items():
        if region in regions:
            return partition
    return None


def close_regions(value: str, limit: int = 3) -> list[str]:
    """The real region names nearest to `value` (typos, a missing digit), best first."""
    every = [region for regions in partitions().values() for region in regions]
    return difflib.get_close_matches(value, every, n=limit, cutoff=0.6)


def region_problem(value: str) -> Optional[str]:
    """Why `value` is not an AWS region botocore knows (None when it is one)."""
    if partition_of(value) is not None:
        return None
    if len(value) > MAX_QUOTED:  # no region is this long: do not echo (or fuzzy-match) a blob
        return f"is {len(value)} characters long, not an AWS region name (e.g. us-east-2)"
    close = close_regions(value)
    if not close:
        return f"'{value}' is not an AWS region botocore knows (e.g. us-east-2)"
    named = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f"'{value}' is not an AWS region botocore knows; did you mean {named}?"
