"""`version`: the installed shoal's version (as `shoal --version`)."""


def version() -> None:
    """Print shoal's version.

    \b
    Examples:
      shoal version
      shoal --home /tmp/ci-home version
    """
    from cli.app import print_version

    print_version()
