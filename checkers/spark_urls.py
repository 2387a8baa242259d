"""Where a Spark master or a Spark Connect server listens, read from its URL."""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_CONNECT_PORT = 15002
"""Spark Connect's port when a `sc://` URL names none."""


def spark_endpoints(url: str) -> list[tuple[str, int]]:
    """The (host, port) a standalone master (`spark://h1:7077[,h2:7077]`) or a Spark Connect
    server (`sc://host[:port][/;params]`) listens at; [] for other masters (local, yarn,
    k8s, ...), which Spark reaches by its own means. ValueError for a malformed URL."""
    scheme, separator, rest = url.partition("://")
    if not separator or scheme not in ("spark", "sc"):
        return []
    default = 7077 if scheme == "spark" else DEFAULT_CONNECT_PORT
    hosts = rest.split("/", 1)[0].split(",") if scheme == "spark" else [rest.split("/", 1)[0]]
    endpoints = []
    for host in hosts:
        try:
            parts = urlsplit(f"//{host}")
            name, port = parts.hostname, parts.port
        except ValueError as err:
            raise ValueError(f"{url}: {err}; expected {scheme}://HOST:PORT") from None
        if not name:
            raise ValueError(f"{url} names no host; expected {scheme}://HOST:PORT")
        endpoints.append((name, port or default))
    return endpoints
