"""Images from OCI/Docker registries: references, credentials, the distribution protocol."""
