"""The container driver: allocations as containers of a Docker-compatible engine."""
