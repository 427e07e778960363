"""`find_offers`: one request over every provider at once.

Each provider runs on a thread of its own (providers/accounts/parallel.py), from opening
its catalog (and with it its cache connection, which stays on that thread) to its last
offer; inside it, a cloud downloads its due regions' prices at once while its account's
quotas are fetched. With `--region` names, the providers first say which regions they have
(regions.RegionGate) and each takes its own. A provider that fails is a failure of the
answer, named, and the others still answer; when every provider fails, `error` is the last
failure (the others in its `earlier`), for the caller to raise once it has shown them.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from providers.core.errors import ConfigError, ShoalError, UsageError
from providers.offers.judge import Verdicts
from providers.offers.model import Failure, OffersAnswer
from providers.offers.rank import ranked
from providers.offers.regions import RegionGate
from providers.offers.request import OfferRequest, checked

if TYPE_CHECKING:
    from providers.registry import Catalog

OpenCatalog = Callable[[str], "Catalog"]
# Catalogs are opened one at a time: two connections creating the cache file at once race
# on its journal mode (SQLite answers "database is locked" at once, without waiting).
_OPENING = threading.Lock()
COUNTED = {
    "arch": "another architecture",
    "too-small": "too small",
    "not-offered": "not offered in the market asked",
}


def find_offers(
    request: OfferRequest, providers: Sequence[str], open_catalog: OpenCatalog
) -> OffersAnswer:
    """The offers of `request` over `providers` (each catalog opened by `open_catalog`, on
    the provider's own thread), ranked; see the module for failures."""
    from providers.accounts.parallel import run_all

    names = list(dict.fromkeys(providers))
    if not names:
        raise UsageError("--provider is empty; name one, e.g. --provider aws,gcp")
    request = replace(checked(request), providers=tuple(names))
    gate = RegionGate(names, request.named_regions) if request.named_regions else None
    calls = [functools.partial(_provider, name, request, open_catalog, gate) for name in names]
    results = run_all(calls, workers=len(calls))
    if gate is not None and gate.error is not None:
        raise gate.error
    answer = OffersAnswer(request.wire())
    errors: list[ShoalError] = []
    counted: dict[str, int] = {}
    for name, result in zip(names, results, strict=True):
        if isinstance(result, Exception):
            if not isinstance(result, ShoalError):
                raise result  # a bug: the caller's one line for the unexpected
            if len(names) == 1 and isinstance(result, (UsageError, ConfigError)):
                raise result  # the request or the config file is wrong, not the provider
            failure = Failure(name, _said(name, result))
            answer.failures.append(failure)
            answer.failures.extend(Failure(name, text) for text in result.earlier)
            errors.append(result)
            continue
        verdicts = result
        answer.offers.extend(verdicts.offers)
        answer.rejected.extend(verdicts.rejected)
        answer.failures.extend(verdicts.failures)
        answer.notes.extend(n for n in verdicts.notes if n not in answer.notes)
        for code, n in verdicts.counted.items():
            counted[code] = counted.get(code, 0) + n
    for code, n in sorted(counted.items()):
        answer.notes.append(
            f"{n} candidate(s) left out as {COUNTED.get(code, code)} ({code}; not listed: "
            "a request without GPUs matches most types)"
        )
    if gate is not None and gate.unplaced:
        answer.notes.append(
            f"--region {', '.join(gate.unplaced)}: none of the providers that answered has it"
        )
    if errors and len(errors) == len(names):
        last = errors[-1]
        last.args = (_said(names[-1], last),)
        last.earlier = tuple(f.message for f in answer.failures if f.message != str(last))
        answer.error = last
    answer.offers = ranked(answer.offers, request)
    return answer


def _said(provider: str, exc: ShoalError) -> str:
    text = str(exc)
    if text.startswith((f"{provider}:", f"{provider} ")):
        return text
    return f"{provider}: {text}"


def _provider(
    name: str, request: OfferRequest, open_catalog: OpenCatalog, gate: RegionGate | None
) -> Verdicts:
    """One provider's verdicts, on its own thread."""
    reported = False
    try:
        with _OPENING:
            catalog = open_catalog(name)
        asked: list[str] = ["all"] if request.all_regions else []
        if gate is not None:
            known = [r.name for r in catalog.list_regions()]
            reported = True
            asked = gate.report(name, known)
            if not asked:
                return Verdicts(request)  # none of the names is this provider's
        verdicts = Verdicts(request)
        _dispatch(catalog, name, asked, verdicts)
        return verdicts
    except BaseException:
        if gate is not None and not reported:
            gate.report(name, None)
        raise


def _dispatch(catalog: Catalog, name: str, asked: list[str], verdicts: Verdicts) -> None:
    """The provider's kind by what its catalog can do; only that kind's module is imported."""
    if hasattr(catalog, "quota_inputs") and hasattr(catalog, "prefetch"):
        from providers.offers.clouds import PricesAndQuotas, cloud_offers

        if isinstance(catalog, PricesAndQuotas):
            verdicts.many = True
            cloud_offers(catalog, name, asked, verdicts)
            return
    if hasattr(catalog, "pool_capacity"):
        from providers.offers.pools import Pools, pool_offers

        if isinstance(catalog, Pools):
            pool_offers(catalog, asked, verdicts)
            return
    if hasattr(catalog, "instance_type"):
        from providers.offers.host import Host, host_offers

        if isinstance(catalog, Host):
            host_offers(catalog, asked, verdicts)
            return
    from providers.offers.clouds import priced_offers

    verdicts.many = True  # a plugin's catalog: its prices and shapes, quotas unknown
    priced_offers(catalog, name, asked, verdicts)
