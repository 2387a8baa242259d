"""The field types squall's configuration models share, and their base model."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints


class ConfigModel(BaseModel):
    """A table of a configuration file: immutable, and every unknown key is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


def one_of(values: Iterable[str]) -> Any:
    """The Literal type of `values`: choices whose list lives in another package."""
    return Literal[tuple(values)]


MAX_SECONDS = 30 * 24 * 3600.0
"""The longest duration a configuration may ask for: 30 days. Finite and far below the
largest timeout the platform can wait for (`threading.TIMEOUT_MAX`)."""

Seconds = Annotated[float, Field(strict=True, gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
"""A duration in seconds, above 0, finite (no inf or NaN), at most 30 days."""
NonNegative = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
"""A finite number >= 0 (a weight, a delay)."""
Count = Annotated[int, Field(strict=True, ge=1)]
"""An integer >= 1."""
Seed = Annotated[int, Field(strict=True, ge=0)]
"""A random seed: an integer >= 0."""
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
"""A non-empty string, spaces around it dropped."""
