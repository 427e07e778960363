"""Public-cloud catalogs (aws, azure, gcp): fetchers of the providers' pricing data, one
SQLite cache with history, and the Catalog built over that cache."""
