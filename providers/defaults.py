"""How long cached provider answers stay fresh unless the config says otherwise: declared once,
for the config readers (providers.config) and the config tables' models (providers.sections)."""

DEFAULT_TTL_HOURS = 24.0  # prices and catalogs: `[provider] ttl_hours`
DEFAULT_TTL_MINUTES = 5.0  # account quotas and usage: `[provider] quota_ttl_minutes`
