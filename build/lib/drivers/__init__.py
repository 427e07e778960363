"""Resource drivers: allocate, inspect and free resources, behind one registry."""
