"""The provider-neutral keys `--select` and `--sort` understand (constants only: cold start)."""

NUMERIC_KEYS: dict[str, str] = {
    "vcpus": "virtual CPUs",
    "memory_gib": "memory in GiB",
    "gpu_count": "GPUs per instance",
    "gpu_memory_gib": "memory per GPU in GiB",
    "price": "on-demand price per hour",
    "spot_price": "spot price per hour",
}
STRING_KEYS: dict[str, str] = {
    "name": "instance type name (alias: instance_type)",
    "instance_type": "instance type name",
    "gpu": "GPU model, e.g. H100",
    "arch": "CPU architecture: x86_64 or arm64",
    "region": "region name",
    "provider": "provider name",
}
KNOWN_KEYS = {**NUMERIC_KEYS, **STRING_KEYS}

HELP = (
    "Filter with KEY OP VALUE: = != > >= < <=, 'KEY in (a,b)', 'KEY notin (a,b)', "
    "KEY (exists), !KEY (absent). Keys: " + ", ".join(sorted(KNOWN_KEYS)) + ". "
    "Comma-separate or repeat; e.g. --select 'vcpus>=16,gpu in (H100,A100)'. "
    "Or a JSON list in the upstream Selector shape (operators In, NotIn, Exists, "
    """DoesNotExist, Gt, Gte, Lt, Lte): --select '[{"key":"gpu","operator":"In","""
    """"values":["H100"]}]'."""
)
