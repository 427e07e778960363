"""A real loopback registry and OCI images for the `image pull REF` tests and benchmark.

- server.py: `Registry.start(mode)`: Debian's docker-registry (distribution 2.8) on
  127.0.0.1, mode "plain" | "basic" (htpasswd) | "tls" (throw-away CA) | "token";
- tokens.py: `TokenServer`, the token mode's JWT issuer (RS256, `access` claims, refresh
  tokens, short lifetimes, queued failures, a request log);
- pki.py: the throw-away CA, server certificate and token signing key;
- layouts.py: OCI image layouts written in Python (`Layout`, `sample_image`, `sample_index`,
  `sized_image`) and `push()` with skopeo;
- conftest.py: the pytest fixtures (the only module here that imports pytest).

The benchmark loads the package by path, so that the repository stays off sys.path and
shoal is the installed one (the modules import each other relatively):

    spec = importlib.util.spec_from_file_location(
        "shoal_bench_registry", DIR / "__init__.py", submodule_search_locations=[str(DIR)]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    spec.loader.exec_module(package)
    server = importlib.import_module("shoal_bench_registry.server")
    layouts = importlib.import_module("shoal_bench_registry.layouts")
"""
