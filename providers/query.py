"""Catalog queries: the use cases behind `regions`, `types`, `resources` and `pricing`.

The CLI parses flags into a `Query`, calls one function here and renders the typed answer;
choosing regions, dispatching a window, selecting, sorting (one sort: providers/compare.py),
limiting and gathering several providers happen here. Nothing here prints: warnings a
renderer should show travel in the answers' `notes`, failures of one provider among
several in `failures`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from providers.core.errors import ConfigError, ShoalError, UsageError

if TYPE_CHECKING:
    from providers.compare import Row
    from providers.models import (
        InstanceTypeSpec,
        RegionSpec,
        Resource,
        ResourceListOptions,
        ResourcePricing,
        Selector,
    )
    from providers.registry import Catalog

OpenCatalog = Callable[[str], "Catalog"]


@runtime_checkable
class ChoosesRegions(Protocol):
    """A catalog that decides which regions `--region` means itself (a cloud's: its
    default region, the regions already cached, its region list; providers/cloud/catalog.py):
    the query asks it once and then asks each region it named."""

    def regions_for(self, asked: Sequence[str]) -> list[str]: ...


@dataclass(frozen=True)
class Query:
    """What a catalog command asks: regions (none: the provider's default set; "all":
    every region it lists), selectors, an optional window, sort key and row limit."""

    regions: Sequence[str] = ()
    selectors: Sequence[Selector] = ()
    start: datetime | None = None
    end: datetime | None = None
    sort: str | None = None
    limit: int | None = None
    available: bool = False  # pricing: only what the account has quota to launch now

    @property
    def windowed(self) -> bool:
        return self.start is not None


@dataclass
class TypesAnswer:
    types: list[InstanceTypeSpec]
    notes: list[str] = field(default_factory=list)  # e.g. rows a selector could not judge


@dataclass
class ResourcesAnswer:
    """Now: a list of Resource; with a window: the spec's timestamp -> Resource map."""

    now: list[Resource] = field(default_factory=list)
    window: dict[str, Resource] | None = None


@dataclass(frozen=True)
class ProviderFailure:
    provider: str
    error: ShoalError

    @property
    def message(self) -> str:
        """The error with the provider named once (most messages already start with it)."""
        text = str(self.error)
        if text.startswith((f"{self.provider}:", f"{self.provider} ")):
            return text
        return f"{self.provider}: {text}"


@dataclass
class PricingAnswer:
    """Now: the per-region ResourcePricing list (sorted and limited rows regrouped in their
    order) and the providers that failed; with a window (one provider): the timestamp map."""

    now: list[ResourcePricing] = field(default_factory=list)
    window: dict[str, ResourcePricing] | None = None
    failures: list[ProviderFailure] = field(default_factory=list)
    # Rows after sort and limit, for tables (JSON regroups them into `now`).
    rows: list[Row] = field(default_factory=list)
    # Every provider of several failed: the command's error (the last failure, the others
    # in its `earlier`), raised once the failures are printed as JSON error entries.
    error: ShoalError | None = None


def check_window(start: datetime | None, end: datetime | None) -> None:
    """Window errors are the user's: found before any catalog is asked anything."""
    if end is not None and start is None:
        raise UsageError("--end needs --start; give the window's start too")
    if start is not None and end is not None and end < start:
        from providers.core.wire import format_time

        raise UsageError(
            f"--end {format_time(end)} is before --start {format_time(start)}; swap them"
        )


def _options(region: RegionSpec | None, query: Query) -> ResourceListOptions:
    from providers.models import ListResourceFilter, RegionSpec, ResourceListOptions

    return ResourceListOptions(
        region=region or RegionSpec(),
        start_time=query.start,
        end_time=query.end,
        filter=ListResourceFilter(resource_selectors=list(query.selectors))
        if query.selectors
        else None,
    )


def chosen_regions(catalog: Catalog, names: Sequence[str]) -> list[RegionSpec | None]:
    """The regions `--region` names: as a catalog that chooses its own decides them; else
    None (the provider's default set), every region it lists ('all'), or the names given."""
    from providers.models import RegionSpec

    if isinstance(catalog, ChoosesRegions):
        return [RegionSpec(name=n) for n in catalog.regions_for(names)]
    if not names:
        return [None]
    if "all" in names:
        return list(catalog.list_regions())
    return [RegionSpec(name=n) for n in dict.fromkeys(names)]


def _window_region(catalog: Catalog, names: Sequence[str]) -> RegionSpec | None:
    """The one region a window is for. Counted on the flags: without --region it is the
    provider's default (the catalog decides it, and says when that is more than one), and
    one name goes to the catalog as given (its window method decides and checks it)."""
    from providers.models import RegionSpec

    if not names:
        return None
    if "all" in names:
        chosen = chosen_regions(catalog, names)
    else:
        chosen = [RegionSpec(name=n) for n in dict.fromkeys(names)]
    if len(chosen) != 1:
        raise UsageError("a window (--start/--end) is for one region; give one --region")
    return chosen[0]


def regions(catalog: Catalog) -> list[RegionSpec]:
    return catalog.list_regions()


def types(catalog: Catalog, provider: str, query: Query) -> TypesAnswer:
    from providers import selectors
    from providers.models import selector_record

    _refuse_price_keys(query)
    found = []
    unjudged = selectors.UnjudgedCount()
    for region in chosen_regions(catalog, query.regions):
        for spec in catalog.list_instance_types(region):
            record = selector_record(spec, provider=provider)
            if selectors.matches(query.selectors, record):
                found.append((record, spec))
            else:
                unjudged.add(query.selectors, record)
    if query.sort:
        key = query.sort.lstrip("-")
        if key not in selectors.KNOWN_KEYS:
            known = ", ".join(sorted(selectors.KNOWN_KEYS))
            raise UsageError(f"--sort {query.sort!r}: unknown key; known: {known}")
        found.sort(key=lambda pair: _sort_key(pair[0].get(key)), reverse=query.sort.startswith("-"))
    specs = [spec for _, spec in found][: query.limit]
    return TypesAnswer(specs, [f"{provider}: {note}" for note in unjudged.notes()])


def resources(catalog: Catalog, query: Query) -> ResourcesAnswer:
    from providers.registry import ResourcesInRegions

    check_window(query.start, query.end)
    if query.windowed:
        region = _window_region(catalog, query.regions)
        return ResourcesAnswer(window=catalog.list_resource_predictions(_options(region, query)))
    if isinstance(catalog, ResourcesInRegions):  # asks its regions at once
        return ResourcesAnswer(
            now=catalog.list_resources_in(list(query.regions), _options(None, query))
        )
    out: list[Resource] = []
    for region in chosen_regions(catalog, query.regions):
        out.extend(catalog.list_resources(_options(region, query)))
    return ResourcesAnswer(now=out)


def pricing(providers: Sequence[str], open_catalog: OpenCatalog, query: Query) -> PricingAnswer:
    """Every provider's prices; one that fails is a failure in the answer (the others
    still answer); when all fail, `error` is the last failure, for the caller to raise
    after showing them."""
    from providers.compare import flatten, regroup, sort_rows

    check_window(query.start, query.end)
    names = list(dict.fromkeys(providers))
    if not names:
        raise UsageError("--provider is empty; name one, e.g. --provider local")
    if query.available and query.windowed:
        raise UsageError("--available is about now; drop --start/--end, or --available")
    if len(names) > 1 and query.windowed:
        raise UsageError("a window (--start/--end) is for one provider; give one --provider")
    if query.sort:
        sort_rows([], query.sort)  # an unknown key fails before any provider is asked
    answer = PricingAnswer()
    for name in names:
        try:
            got = _pricing_of(open_catalog(name), name, query)
        except ShoalError as exc:
            if len(names) == 1 and isinstance(exc, (UsageError, ConfigError)):
                raise  # the request or the config file is wrong, not the provider
            # A provider that failed is an entry of the answer, also when it was the only
            # one asked: `--json` prints the documented error entry, then the error is raised.
            answer.failures.append(ProviderFailure(name, exc))
            continue
        if isinstance(got, dict):
            answer.window = got
            return answer
        answer.now.extend(got)
    if answer.failures and not answer.now:
        *others, last = answer.failures
        last.error.args = (last.message,)  # same kind (exit code), provider named once
        last.error.earlier = tuple(f.message for f in others)
        answer.error = last.error
        return answer
    rows = flatten(answer.now)
    if query.sort:
        rows = sort_rows(rows, query.sort)
    if query.limit is not None:
        rows = rows[: query.limit]
    if query.sort or query.limit is not None:
        answer.now = regroup(rows)
    answer.rows = list(rows)
    return answer


def _pricing_of(
    catalog: Catalog, name: str, query: Query
) -> list[ResourcePricing] | dict[str, ResourcePricing]:
    if query.windowed:
        region = _window_region(catalog, query.regions)
        return catalog.list_pricing_predictions(_options(region, query))
    out: list[ResourcePricing] = []
    for region in chosen_regions(catalog, query.regions):
        for pricing in catalog.list_pricing(_options(region, query)):
            pricing.provider = pricing.provider or name
            out.append(pricing)
    if query.available:
        from providers.registry import KnowsQuotas

        if not isinstance(catalog, KnowsQuotas):
            raise UsageError(
                f"--available needs an account's quotas; {name} has none (aws, azure, gcp do)"
            )
        catalog.keep_launchable(out)
    return out


def _refuse_price_keys(query: Query) -> None:
    """Instance types carry no prices: a price filter here would silently match nothing."""
    keys = [s.key for s in query.selectors] + ([query.sort.lstrip("-")] if query.sort else [])
    for key in keys:
        if key in ("price", "spot_price"):
            raise UsageError(f"{key!r} is a pricing key; use `shoal pricing --select` for prices")


def _sort_key(value: object) -> tuple[int, object]:
    if value is None:
        return (2, 0)
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, str(value).lower())
