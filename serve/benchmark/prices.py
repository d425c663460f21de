"""Where a run's cost comes from, in words shown next to every USD / M output tokens figure.

A run's `usd_per_million_output_tokens` is only as good as the hourly price it was given: the web
app gives raypd's estimate (the instance catalogue's list prices, whose basis
`components.config.catalogue.price_basis` names for the stack's region), a person at the CLI gives
`--usd-per-hour` from wherever they like. The Contract 6 summary has no key for that basis (the
contract fixes its keys), so the basis travels beside the run (the web app's stored settings, the
`compare --region` option) and is said in the pages and the report text.

Not one of the files the in-cluster Job mounts (job.RUN_FILES): it needs the raypd checkout.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence

from components.config import catalogue
from components.config.regions import region_problem

# A CLI run's price, when nobody said it was raypd's estimate: the person's own figure.
GIVEN_PRICE = "the --usd-per-hour given to the run (where that price comes from is not recorded)"
COST_ROW = "USD / M output tokens"
# What an AWS region name can be made of; anything else is refused without echoing it raw (it may
# hold terminal escapes or not be text at all).
_REGION_CHARACTERS = re.compile(r"[a-z0-9-]{1,64}")


class PriceRegionError(ValueError):
    """A region for the price basis that is not an AWS region."""


def basis_for_region(region: str) -> str:
    """The catalogue's basis for a stack in `region` (checked first: it is typed by people)."""
    if not _REGION_CHARACTERS.fullmatch(region):
        raise PriceRegionError(f"must be an AWS region name such as us-east-2, got {region[:40]!r}"
                               + (f" ({len(region)} characters)" if len(region) > 40 else ""))
    problem = region_problem(region)
    if problem is not None:
        raise PriceRegionError(problem)
    return catalogue.price_basis(region)


def estimate_basis(region: Optional[str]) -> str:
    """The basis of raypd's own estimate for a stack in `region`; a run stored before the region
    was kept with it says the price list's and that its stack's region is not known."""
    if isinstance(region, str) and region:
        return catalogue.price_basis(region)
    return (f"{catalogue.price_basis(catalogue.PRICE_REGION)}; the stack's region was not recorded "
            "with this run, so it may not be that region's price")


def said(basis: Optional[str]) -> str:
    """A basis as it reads after "from": "the us-east-1 on-demand list price, ..." or GIVEN_PRICE."""
    return f"the {basis}" if basis else GIVEN_PRICE


def price_notes(priced: Sequence[tuple[str, Optional[str]]]) -> list[str]:
    """What the cost figures of the runs that have one are priced at: (label, basis or None) pairs
    in; one line when every run's basis is the same, else one line per run."""
    if not priced:
        return []
    if len({basis for _, basis in priced}) == 1:
        return [f"{COST_ROW}: from {said(priced[0][1])}."]
    return [f"{COST_ROW} of {label}: from {said(basis)}." for label, basis in priced]
