"""`shoal config check`: every table of the config file checked by what reads it, at once.

A command checks only the tables it reads (`alloc` a driver's, `pricing -p aws` [aws]), so
a typo in another table waits for the command that reads it. This runs each table's own
check (the same readers those commands call) and starts nothing: no workload, no network.
The first mistake is raised as the ConfigError its reader raises (the file, the table, the
key and the fix).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from providers.core.settings import Settings


def check_config(settings: Settings) -> list[str]:
    """Check every table `settings.config` holds (the file's TOML, its top-level tables and
    non-finite numbers were checked when it was read); the tables checked, in file order."""
    from drivers.image.store import image_settings
    from drivers.registry import DEFAULT_INSTANCE, builtin_kinds, driver_list, open_driver
    from drivers.service.queue import grace
    from providers.config import section
    from providers.sections import SECTIONS

    checked: list[str] = []
    for name in settings.config:
        if name in SECTIONS:
            section(settings, name)
        elif name == "alloc":
            grace(settings)
        elif name == "image":
            image_settings(settings)
        elif name == "ledger":
            from drivers.ledger.url import ledger_url

            found = ledger_url(settings)  # its form
            if found is not None:
                found.params()  # libpq reads it (psycopg installed, known parameters)
        elif name == "drivers":
            builtins = set(builtin_kinds())
            for full, config in driver_list(settings).items():
                kind = full.partition("/")[0]
                if not config and kind in builtins and full.endswith("/" + DEFAULT_INSTANCE):
                    continue  # not in the file: the built-in's default instance
                driver = open_driver(settings, full)
                # A driver that checks its table when first reading it (container: `status`
                # and `free` need not) is asked for it now.
                getattr(driver, "cfg", None)
                checked.append(f'drivers."{full}"')
            continue
        else:
            continue  # a plugin provider's table: its plugin reads and checks it
        checked.append(name)
    return checked
