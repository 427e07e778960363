"""Google Cloud: Compute Engine regions, machine types and hourly prices from the Cloud
Billing Catalog API (SKUs, API key) and the Compute Engine API (machine shapes, token)."""
