"""Reading the TOML files squall is configured with (specs, campaigns, inventories)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from squall.config.errors import ConfigurationError


def read_toml(
    path: Path,
    *,
    what: str,
    hint: str = "",
    error: type[ConfigurationError] = ConfigurationError,
) -> dict[str, Any]:
    """The document in the TOML file `path` (a `what`: spec, campaign...); `error` naming the
    file when it cannot be read (followed by `hint`) or is not TOML."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise error(f"cannot read {what} {path}: {err.strerror}{hint}") from None
    return parse_toml(text, source=str(path), error=error)


def parse_toml(
    text: str, *, source: str, error: type[ConfigurationError] = ConfigurationError
) -> dict[str, Any]:
    """The document in TOML `text`; `error` naming `source` when it is not valid TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise error(f"{source}: not valid TOML ({err}); fix the syntax") from None
