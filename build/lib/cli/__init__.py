"""The shoal command line: parse, call providers/drivers, render."""
