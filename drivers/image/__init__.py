"""Image pull: stream download, verify and unpack, safely and resumably."""
