"""`ledger migrate`, `ledger copy`: the ledger's schema, and this machine's SQLite ledger
moved onto the team's PostgreSQL ledger (drivers.ledger.copy does both)."""

import sys
from typing import Annotated

import typer

from cli import output
from cli.commands.options import JsonOpt, LongOutputOpt
from cli.state import state
from providers.core.env import ENV_LEDGER_URL

app = typer.Typer(
    help="""Migrate the ledger's schema, or copy this one to PostgreSQL.

    The team ledger is PostgreSQL, named by SHOAL_LEDGER_URL or [ledger] url; without
    one, the ledger is this machine's SQLite file.

    \b
    Examples:
      shoal ledger migrate
      shoal ledger copy --to postgresql://alice@db.example:5432/shoal
    """,
    no_args_is_help=True,
)


@app.command("migrate")
def migrate(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    output_format: LongOutputOpt = None,
) -> None:
    """Create or upgrade the configured ledger's schema.

    The team ledger (SHOAL_LEDGER_URL or [ledger] url) gets its schema made or upgraded
    on the server; machines running this at once are served one at a time, and running
    it again changes nothing. Without a team ledger, this machine's SQLite ledger is
    upgraded in place. Prints the schema version found and the version now (--json:
    ledger, from, to). Exit 69 when the server is unreachable, 77 when it refuses the
    credentials, 78 for a URL libpq cannot read.

    \b
    Examples:
      shoal ledger migrate
      shoal ledger migrate --json
    """
    as_json = output.select(as_json, output_format)
    from drivers.ledger.copy import migrate_ledger

    done = migrate_ledger(state(ctx).settings())
    if as_json:
        output.emit_json(done.to_json())
    else:
        kind = "ledger" if done.team else "SQLite ledger"
        if done.absent:
            said = f"no {kind} at {done.ledger} yet: nothing to upgrade (the first alloc makes it)"
        elif done.found == done.now:
            said = f"{kind} {done.ledger}: schema {done.now}, up to date"
        else:
            said = f"{kind} {done.ledger}: schema {done.found} -> {done.now}"
        _line(said)
    if not done.team:
        output.message(
            f"no team ledger is configured ({ENV_LEDGER_URL} or [ledger] url): this was "
            "this machine's SQLite ledger"
        )


@app.command("copy")
def copy(
    ctx: typer.Context,
    to: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="URL",
            help="The team ledger's postgresql:// URL (its password in ~/.pgpass or "
            "PGPASSWORD rather than in the URL).",
            show_default=False,
        ),
    ],
    as_json: JsonOpt = False,
    output_format: LongOutputOpt = None,
) -> None:
    """Copy this machine's SQLite ledger into a team ledger.

    Every allocation with its status, history included, in one transaction: all of it
    or nothing, Ctrl-C included. Rows already there unchanged are skipped, so running
    it again copies nothing; an id there with different content is a conflict (exit 1,
    nothing written). Refused (exit 75) while an alloc or free is in flight or an
    `alloc --wait` waits here. The SQLite ledger is left as it was; the URL is never
    shown with its password. --json: from, to, copied, skipped, total.

    \b
    Examples:
      shoal ledger copy --to postgresql://alice@db.example:5432/shoal
      shoal ledger copy --to postgresql://alice@db.example/shoal --json
    """
    as_json = output.select(as_json, output_format)
    from drivers.ledger.copy import copy_ledger

    done = copy_ledger(state(ctx).settings(), to)
    if as_json:
        output.emit_json(done.to_json())
        return
    if done.absent:
        _line(f"nothing to copy: no SQLite ledger at {done.source}")
        return
    _line(
        f"copied {done.copied} allocation(s) from {done.source} to {done.target} "
        f"({done.skipped} already there, {done.total} in all)"
    )
    output.message(
        f"shoal: hint: to use it, set {ENV_LEDGER_URL} (or [ledger] url in the config file) "
        f"to {done.target}; {done.source} was left as it was"
    )


def _line(text: str) -> None:
    """The command's result, for people: one line on stdout."""
    sys.stdout.write(f"{output.printable(text)}\n")
