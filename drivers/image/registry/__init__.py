"""Images from registries (OCI distribution spec v1.1 / Docker registry API v2).

reference.py names an image as docker and podman do; client.py speaks the protocol
(authentication, manifests, platforms, blobs); credentials.py finds what the container tools
stored; cache.py, layers.py and pull.py keep the blobs, apply the layers and run a pull.
Each module imports its heavy dependencies (httpx) inside the functions that need them.
"""
