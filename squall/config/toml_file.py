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
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise error(f"cannot read {what} {path}: {err.strerror}{hint}") from None
    except UnicodeDecodeError as err:
        line = Path(path).read_bytes()[: err.start].count(b"\n") + 1
        raise error(
            f"{path}, line {line}: not UTF-8 text (byte {err.object[err.start]:#04x}); "
            "TOML files are UTF-8"
        ) from None
    return parse_toml(text, source=str(path), error=error)


def parse_toml(
    text: str, *, source: str, error: type[ConfigurationError] = ConfigurationError
) -> dict[str, Any]:
    """The document in TOML `text`; `error` naming `source` when it is not valid TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise error(f"{source}: not valid TOML ({err}); fix the syntax") from None
    except RecursionError:
        line = _deepest_line(text)
        raise error(
            f"{source}, line {line}: arrays or tables nested too deeply to read; a spec "
            "needs a few levels at most"
        ) from None


def _deepest_line(text: str) -> int:
    """The line where brackets and braces nest deepest (where a reader gives up)."""
    depth = deepest = 0
    line = where = 1
    for char in text:
        if char == "\n":
            line += 1
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, line
        elif char in "]}":
            depth = max(0, depth - 1)
    return where
