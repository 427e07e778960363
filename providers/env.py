"""Every environment variable shoal reads, as a named constant (no imports: cold start)."""

ENV_HOME = "SHOAL_HOME"
ENV_CONFIG = "SHOAL_CONFIG"
ENV_PROVIDER = "SHOAL_PROVIDER"
ENV_DRIVER = "SHOAL_DRIVER"
ENV_NO_COLOR = "NO_COLOR"
