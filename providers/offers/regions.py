"""Which provider takes which `--region` names: `-r us-east-1 -r us-central1 -p aws,gcp`
asks aws for us-east-1 and gcp for us-central1.

Each provider, on its own thread, reports the region names it has (its catalog's list: a
cloud's regions, a kubeconfig's contexts, `local`) or that it failed; once every provider
has, each takes the names it has, in the order given. A name no provider asked has is the
user's error (exit 2), naming it with the closest names; when a provider failed before it
could say, such a name is only noted (it may have been that provider's).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from providers.core.errors import UsageError


class RegionGate:
    def __init__(self, providers: Sequence[str], asked: Sequence[str]) -> None:
        self._providers = list(providers)
        self._asked = list(dict.fromkeys(asked))
        self._known: dict[str, list[str] | None] = {}
        self._taken: dict[str, list[str]] | None = None
        self._cond = threading.Condition()
        self.error: UsageError | None = None
        self.unplaced: list[str] = []

    def report(self, provider: str, known: list[str] | None) -> list[str]:
        """The names `provider` takes, once every provider has reported (`known` None: it
        failed). Empty when it takes none, or when the request is wrong (`error`)."""
        with self._cond:
            self._known[provider] = known
            if len(self._known) >= len(self._providers):
                self._decide()
                self._cond.notify_all()
            else:
                self._cond.wait_for(lambda: self._taken is not None)
            assert self._taken is not None
            return self._taken.get(provider, [])

    def _decide(self) -> None:
        answered = {p: k for p, k in self._known.items() if k is not None}
        taken = {p: [n for n in self._asked if n in set(k)] for p, k in answered.items()}
        unknown = [n for n in self._asked if not any(n in taken[p] for p in taken)]
        if unknown and len(answered) == len(self._known):
            self.error = _unknown(unknown[0], self._providers, answered)
            taken = {}
        self.unplaced = unknown
        self._taken = taken


def _unknown(name: str, providers: list[str], known: dict[str, list[str]]) -> UsageError:
    import difflib

    every = sorted({n for names in known.values() for n in names})
    close = difflib.get_close_matches(name, every, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    asked = ", ".join(providers)
    return UsageError(
        f"--region {name!r}: no provider asked ({asked}) has such a region{hint} (`shoal "
        "regions -p PROVIDER` lists them)"
    )
