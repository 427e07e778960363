"""The supervisor of one allocation and the /proc identity it shares with shoal:
standard library only, run by path (`python -I -S supervise.py`)."""
