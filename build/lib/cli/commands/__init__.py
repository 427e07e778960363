"""Subcommands: each parses its flags, calls providers/drivers, and renders."""
