"""Console entry point."""

from __future__ import annotations


def main() -> None:
    import sys

    from cli.app import build_app

    build_app(sys.argv[1:])(prog_name="shoal")


if __name__ == "__main__":
    main()
