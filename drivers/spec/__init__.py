"""The spec's contract (drivers.txt): the ResourceDriver protocols, its types and
views, capacity arithmetic. Imports nothing of shoal's machinery."""
