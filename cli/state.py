"""Per-invocation state: global flags that override the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from providers.core.settings import Settings


@dataclass
class State:
    env_overrides: dict[str, str] = field(default_factory=dict)

    def settings(self) -> Settings:
        from cli.wiring import CONFIG_SECTIONS
        from providers.core.settings import Settings

        return Settings.from_env({**os.environ, **self.env_overrides}, CONFIG_SECTIONS)


def state(ctx: typer.Context) -> State:
    root = ctx.find_root()
    if not isinstance(root.obj, State):
        root.obj = State()
    return root.obj
