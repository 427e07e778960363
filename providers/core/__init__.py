"""The kernel every layer shares: errors and exit kinds, environment names, settings and
paths, the wire format of the spec's JSON, times, URLs, the HTTP client, plugin registries,
the usage protocol, number and YAML safety, and the pydantic input schema (`schema` and
`strict`; `payload` for providers' documents). Nothing here knows a provider, a driver or
the ledger; they all build on it."""
