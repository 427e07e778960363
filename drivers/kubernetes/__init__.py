"""The kubernetes driver: allocations as Pods or Jobs in a cluster."""
