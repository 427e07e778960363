"""Console entry point."""

from __future__ import annotations


def main() -> None:
    from cli.app import app

    app(prog_name="shoal")


if __name__ == "__main__":
    main()
