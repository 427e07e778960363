"""`python -m cli`: shoal as the console script runs it."""

try:
    from cli.main import run
except KeyboardInterrupt:  # Ctrl-C during this import, before main() can answer it
    import sys

    sys.stderr.write("shoal: error: interrupted\n")
    raise SystemExit(130) from None

run()
