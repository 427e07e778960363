"""An account's capacity per region, from the catalog cache or its fetcher.

The freshness rules are the price catalog's, with a short TTL (`[provider]
quota_ttl_minutes`, default 5: quotas and usage change as instances start): a fresh answer
is served from the cache; due regions are fetched together (the fetcher asks them
concurrently); a failed refresh serves the cached answer with a warning saying how old it
is, unless --refresh asked for new data; --offline never fetches; --max-age refuses older
answers. Answers are cached per account (the key id, subscription or project: never a
secret), so two accounts on one machine never see each other's figures. A region whose
quotas the provider could not read (`quotas_unknown`) is cached too, for --offline and for
a failed refresh to fall back on, but is never fresh: the next call asks again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from providers.accounts.model import (
    AccountFetcher,
    AccountSnapshot,
    InstanceUsage,
    Quota,
    Reservation,
    sound_quotas,
)
from providers.core.errors import CredentialsError, ShoalError
from providers.core.timeutil import human_duration, utcnow

if TYPE_CHECKING:
    from providers.cloud.cache import CatalogCache
    from providers.core.settings import Settings



class AccountCapacity:
    def __init__(
        self,
        provider: str,
        settings: Settings,
        cache: CatalogCache,
        make_fetcher: Callable[[], AccountFetcher],
        ttl: timedelta,
        warn: Callable[[str], None],
    ) -> None:
        self.provider = provider
        self.freshness = settings.freshness
        self.cache = cache
        self._make_fetcher = make_fetcher
        self._fetcher: AccountFetcher | None = None
        self.ttl = ttl
        self.warn = warn

    def fetcher(self) -> AccountFetcher:
        if self._fetcher is None:
            self._fetcher = self._make_fetcher()
        return self._fetcher

    def account(self) -> str:
        """The account whose answers to use: the credentials' own; offline without
        credentials, the one most recently cached."""
        try:
            return self.fetcher().account
        except CredentialsError:
            cached = self.cache.accounts(self.provider)
            if self.freshness.offline and cached:
                return cached[0]
            raise

    def regions(self) -> list[str]:
        """Every region the account can use (for --region all)."""
        account = self.account()
        names, fetched_at = self.cache.account_regions(self.provider, account)
        if not all(isinstance(n, str) for n in names):
            names, fetched_at = [], None  # an edited cache: asked again (or refused offline)
        now = utcnow()
        if self.freshness.offline:
            names = names or sorted(self.cache.account_snapshots(self.provider, account))
            if not names:
                raise ShoalError(
                    f"{self.provider}: no account capacity cached and --offline forbids "
                    "fetching; run once without --offline"
                )
            return names
        # The region list changes rarely: a day, as for the price catalog's.
        fresh_list = fetched_at is not None and now - fetched_at < timedelta(days=1)
        if names and fresh_list and not self.freshness.refresh:
            return names
        try:
            fresh = sorted(self.fetcher().regions())
        except ShoalError as exc:
            if not names or self.freshness.refresh:
                raise
            self.warn(f"{self.provider}: could not refresh the account's regions ({exc})")
            return names
        self.cache.save_account_regions(self.provider, account, fresh, now)
        return fresh

    def snapshots(self, regions: Sequence[str]) -> list[tuple[AccountSnapshot, bool]]:
        """(snapshot, stale) per region asked, in that order."""
        account = self.account()
        cached = self.cache.account_snapshots(self.provider, account)
        now = utcnow()
        max_age = self.freshness.max_age
        read: dict[str, AccountSnapshot] = {}  # cached payloads read once, here or below

        def unknown(region: str) -> bool:
            """A cached answer whose quotas were unknown is asked again (as is one that
            does not read: the fetch replaces it)."""
            try:
                read[region] = read.get(region) or loads(cached[region][1])
            except ShoalError:
                return True
            return bool(read[region].quotas_unknown)

        due = [
            r
            for r in regions
            if r not in cached
            or self.freshness.refresh
            or not (timedelta(0) <= now - cached[r][0] <= self.ttl)
            or (max_age is not None and now - cached[r][0] > max_age)
            or unknown(r)
        ]
        fetched: dict[str, AccountSnapshot] = {}
        if due and not self.freshness.offline:
            try:
                got = self.fetcher().fetch(due)
            except ShoalError as exc:
                stale = [r for r in due if r in cached]
                if self.freshness.refresh or len(stale) < len(due):
                    raise
                oldest = max(now - cached[r][0] for r in stale)
                if max_age is not None and oldest > max_age:
                    raise
                self.warn(
                    f"{self.provider}: refreshing the account's capacity failed ({exc}); "
                    f"serving answers fetched up to {human_duration(oldest)} ago"
                )
            else:
                fetched = {s.region: s for s in got}
                self.cache.save_account(
                    self.provider,
                    account,
                    [(s.region, s.fetched_at, dumps(s)) for s in got],
                )
        out: list[tuple[AccountSnapshot, bool]] = []
        for region in regions:
            if region in fetched:
                out.append((fetched[region], False))
                continue
            if region not in cached:
                raise ShoalError(
                    f"{self.provider} {region}: no account capacity cached and --offline "
                    "forbids fetching; run without --offline"
                )
            at, payload = cached[region]
            age = now - at
            if max_age is not None and age > max_age:
                raise ShoalError(
                    f"{self.provider} {region}: the cached account capacity is "
                    f"{human_duration(age)} old, older than --max-age "
                    f"{human_duration(max_age)}; refresh it (without --offline)"
                )
            snapshot = read.get(region) or loads(payload)
            out.append((snapshot, age > self.ttl))
        return out


# -- the cache's payload: the snapshot as JSON -------------------------------------------


def _default(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(type(value).__name__)


def dumps(snapshot: AccountSnapshot) -> str:
    return json.dumps(asdict(snapshot), default=_default, allow_nan=False)


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    at = datetime.fromisoformat(value)
    if at.tzinfo is None:
        raise ValueError("a time without its zone")
    return at


def _number(value: object, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("not a number")
    if not math.isfinite(value) or value < 0:
        raise ValueError("not a finite, non-negative number")


def _check(snapshot: AccountSnapshot) -> None:
    """What the fields' types promise, for a payload read back from a file anyone with
    access to the cache could have edited (a cache is never trusted to be ours)."""
    texts = (snapshot.provider, snapshot.region, snapshot.quotas_unknown, *snapshot.sources)
    for text in (*texts, *snapshot.notes, snapshot.zones_unknown, *snapshot.zones_cover):
        if not isinstance(text, str):
            raise TypeError("not a string")
    for name, zones in (snapshot.type_zones or {}).items():
        if not isinstance(zones, list) or not all(isinstance(z, str) for z in (name, *zones)):
            raise TypeError("a type's zones are not a list of names")
    for q in snapshot.quotas:
        _number(q.limit)
        _number(q.used, optional=True)
        if len(q.resource) != 2 or not all(isinstance(part, str) for part in q.resource):
            raise ValueError("a quota's resource is not (type, name)")
        if not all(isinstance(code, str) for code in q.within):
            raise TypeError("a quota's `within` is not a list of codes")
    for u in snapshot.usage:
        _number(u.count)
        _number(u.vcpus, optional=True)
        _number(u.gpus)
    for r in snapshot.reservations:
        _number(r.total)
        _number(r.available)
        _number(r.vcpus, optional=True)
        _number(r.gpus)


def loads(payload: str) -> AccountSnapshot:
    """A cached snapshot; a cache written by another version that does not read is an
    error saying to refresh (it is only a cache)."""
    try:
        raw = json.loads(payload)
        quotas = [
            Quota(
                **{
                    **q,
                    "resource": tuple(q["resource"]),
                    "gpus": tuple(q.get("gpus", ())),
                    "within": tuple(q.get("within", ())),
                }
            )
            for q in raw.pop("quotas")
        ]
        usage = [InstanceUsage(**u) for u in raw.pop("usage")]
        reservations = [
            Reservation(**{**r, "start": _when(r.get("start")), "end": _when(r.get("end"))})
            for r in raw.pop("reservations")
        ]
        fetched_at = _when(raw.pop("fetched_at"))
        if fetched_at is None:
            raise ValueError("no fetched_at")
        snapshot = AccountSnapshot(
            **raw,
            fetched_at=fetched_at,
            quotas=quotas,
            usage=usage,
            reservations=reservations,
        )
        _check(snapshot)
        # A cache written before quotas were made unique, or edited: one quota per code.
        snapshot.quotas, fixed = sound_quotas(snapshot.quotas)
        snapshot.notes.extend(n for n in fixed if n not in snapshot.notes)
        return snapshot
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise ShoalError(
            f"a cached account answer does not read ({type(exc).__name__}); run with "
            "--refresh to fetch it again"
        ) from None
