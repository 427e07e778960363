"""Every environment variable shoal reads, as a named constant (no imports: cold start)."""

ENV_HOME = "SHOAL_HOME"
ENV_CONFIG = "SHOAL_CONFIG"
ENV_PROVIDER = "SHOAL_PROVIDER"
DEFAULT_PROVIDER = "local"  # the provider when neither --provider nor SHOAL_PROVIDER says
ENV_DRIVER = "SHOAL_DRIVER"
ENV_NO_COLOR = "NO_COLOR"
ENV_DEBUG = "SHOAL_DEBUG"
ENV_IMAGE_USER = "SHOAL_IMAGE_USER"
ENV_IMAGE_PASSWORD = "SHOAL_IMAGE_PASSWORD"
