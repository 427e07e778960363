"""YAML without alias bombs.

PyYAML's safe loader shares one object per alias, so a few hundred bytes of nested
aliases decode instantly into a structure that expands to gigabytes as soon as anything
walks it (json.dumps, a type check, a copy). shoal's YAML inputs (definitions, kubeconfigs)
have no use for more than a handful of aliases, so a document may use at most `aliases` of
them; past that it is refused before anything walks it. Deep nesting is refused too.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 100


class YamlRefused(ValueError):
    """The document is valid YAML that shoal will not expand; the message says why."""


def load(text: str, *, aliases: int = 0) -> Any:
    """yaml.safe_load with at most `aliases` alias uses and MAX_DEPTH levels of nesting."""
    import yaml

    budget = [aliases]

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                budget[0] -= 1
                if budget[0] < 0:
                    mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                    where = f"line {mark.line + 1}, column {mark.column + 1}"
                    if aliases == 0:
                        raise YamlRefused(f"{where}: aliases (*name) are not accepted here")
                    raise YamlRefused(f"{where}: more than {aliases} aliases (*name)")
            depth = getattr(self, "_shoal_depth", 0) + 1
            if depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise YamlRefused(f"line {mark.line + 1}: nested deeper than {MAX_DEPTH} levels")
            self._shoal_depth = depth
            try:
                return super().compose_node(parent, index)
            finally:
                self._shoal_depth = depth - 1

    loader = Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
