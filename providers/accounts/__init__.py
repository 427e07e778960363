"""Cloud accounts' capacity: quotas, usage and reservations as the spec's Resource."""
