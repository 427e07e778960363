"""The `local` provider: this machine as a one-region, one-instance-type catalog."""
