"""Which Azure quotas a VM size counts against, and which GPUs a quota family holds.

Azure's Compute Usage API reports, per region, the vCPU quota of every VM family
(`standardDSv5Family`, `Standard NCASv3_T4 Family`, ...), the regional total (`cores`) and
the regional Spot/low-priority total (`lowPriorityCores`). A pay-as-you-go VM takes its vCPUs
from its family and from `cores`; a Spot VM only from `lowPriorityCores`:
https://learn.microsoft.com/azure/virtual-machines/quotas and
https://learn.microsoft.com/azure/virtual-machines/spot-vms#pricing (Spot vCPUs count
against the regional low-priority quota).

A size's family is its `family` in the Resource SKUs API
(https://learn.microsoft.com/rest/api/compute/resource-skus/list), which is also the
`name.value` of the family's usage entry. The names follow no rule one could derive
(Dasv6 -> `standardDav6Family`, NCasT4_v3 -> `Standard NCASv3_T4 Family`), so shoal ships
them as data (quota_families.json, with its source), keyed by series. A size of a series the
table lacks gets the family the naming convention would give
(`standard` + series letters and accelerator upper-cased + version + `Family`), right for
about half of the families and marked as a guess in `family_of`'s answer. Azure spells the
same family with different case and spaces in different places (`StandardNCADSA100v4Family`,
`standardNCADSA100v4Family`), so names are compared with `family_key`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from providers import gpus
from providers.accounts.model import Market, Need, Quota
from providers.azure import sizes
from providers.core.errors import ShoalError

DATA_FILE = "quota_families.json"
REGIONAL = "cores"  # Total Regional vCPUs
SPOT = "lowPriorityCores"  # Total Regional Low-priority vCPUs (Spot and low-priority VMs)

# [Family][features]... : the name without `Standard_` and its vCPU numbers is the series.
_SIZE = re.compile(r"^(?:standard|basic)_([a-z]+)(\d+)(?:-\d+)?([a-z]*)((?:_[a-z0-9]+)*)$")
_VERSION = re.compile(r"^v\d+$")
_GPU_MODELS = {name.upper() for name in gpus.MODELS}


def family_key(name: str) -> str:
    """A family name as compared: without case and spaces (`Standard NCASv3_T4 Family` and
    `standardNCASv3_T4Family` are one family)."""
    return "".join(name.split()).lower()


def series_key(size: str) -> str:
    """`Standard_NC24ads_A100_v4` -> `ncads_a100_v4`, `Standard_E16-4ds_v5` -> `eds_v5`;
    "" for a name that is not a VM size's."""
    match = _SIZE.match(size.strip().lower())
    if match is None:
        return ""
    letters, _number, features, rest = match.groups()
    return letters + features + rest


@dataclass(frozen=True, slots=True)
class FamilyTable:
    as_of: str
    series: Mapping[str, str]  # series key -> family name
    sizes: Mapping[str, str]  # lower-cased size name -> family name (shared series keys)


def _bad(what: str) -> ShoalError:
    # The file ships with shoal: a bad one is a packaging bug, not a user error.
    return ShoalError(f"azure: the built-in quota family table {DATA_FILE} is malformed ({what})")


def parse_table(text: str) -> FamilyTable:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise _bad(str(exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("asOf"), str):
        raise _bad("no asOf date")
    maps: list[dict[str, str]] = []
    for key in ("series", "sizes", "added"):
        table = doc.get(key, {})
        if not isinstance(table, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in table.items()
        ):
            raise _bad(f"{key} is not a map of names")
        maps.append({k.lower(): v for k, v in table.items()})
    series, by_size, added = maps
    return FamilyTable(as_of=doc["asOf"], series={**added, **series}, sizes=by_size)


@cache
def table() -> FamilyTable:
    """The shipped table, read once per process and only when asked for."""
    package = __package__ or "providers.azure"
    return parse_table(resources.files(package).joinpath(DATA_FILE).read_text("utf-8"))


def family_of(size: str) -> tuple[str, bool]:
    """(the quota family of VM size `size`, whether the table knows it); ("", False) for a
    name that is not a size's. Unknown series get the conventional name (see the module)."""
    known = table()
    name = size.strip().lower()
    if name in known.sizes:
        return known.sizes[name], True
    key = series_key(name)
    if not key:
        return "", False
    if key in known.series:
        return known.series[key], True
    return _conventional(key), False


def _conventional(key: str) -> str:
    letters, *tokens = key.split("_")
    versions = [t for t in tokens if _VERSION.match(t)]
    others = [t.upper() for t in tokens if not _VERSION.match(t)]
    return f"standard{letters.upper()}{''.join(others)}{''.join(versions)}Family"


@cache
def family_gpus() -> Mapping[str, tuple[str, ...]]:
    """family_key -> the canonical GPU models of its sizes: from shoal's size table
    (sizes.json: size -> GPU) through this table (size -> family), and from an accelerator
    named in a series (`ncads_h100_v5` -> H100) for series the size table lacks."""
    found: dict[str, set[str]] = {}
    for name, row in sizes.table().rows.items():
        family, _ = family_of(name)
        if row.gpu and family:
            found.setdefault(family_key(family), set()).add(row.gpu)
    for key, family in table().series.items():
        for token in key.split("_")[1:]:
            model = gpus.model(token)
            if model.upper() in _GPU_MODELS:
                found.setdefault(family_key(family), set()).add(model)
    return {family: tuple(sorted(models)) for family, models in found.items()}


def gpus_of_family(family: str) -> tuple[str, ...]:
    return family_gpus().get(family_key(family), ())


class AzureQuotaMap:
    """The QuotaMap for Azure (providers/accounts/model.py). Given the quota codes of a
    snapshot (`codes`), a family is answered in the snapshot's own spelling; otherwise in the
    table's (compare with `family_key`)."""

    def __init__(self, quotas: Iterable[Quota | str] = ()) -> None:
        codes = (q if isinstance(q, str) else q.code for q in quotas)
        self._codes = {family_key(code): code for code in codes}

    def code(self, name: str) -> str:
        return self._codes.get(family_key(name), name)

    def needs(
        self, instance_type: str, vcpus: float | None, gpu: str, gpu_count: int, market: Market
    ) -> list[Need]:
        if not vcpus:
            return []
        if market == "spot":
            return [Need(self.code(SPOT), vcpus)]
        family, _ = family_of(instance_type)
        regional = Need(self.code(REGIONAL), vcpus)
        return [Need(self.code(family), vcpus), regional] if family else [regional]
