"""Provider catalogs: regions, instance types, resources and prices, behind one registry."""
