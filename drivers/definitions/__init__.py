"""Definitions and options: reading a definition (JSON or YAML), its model, the
field types and option parsing shared by the drivers, the [alloc] config."""
