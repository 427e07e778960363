"""Kubernetes: connect like kubectl (kubeconfig, in-cluster, exec plugins) and talk to the API."""
