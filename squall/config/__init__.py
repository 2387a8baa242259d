"""Configuration files as pydantic models: one error type, one TOML reader, one override path.

The models themselves live beside what they configure (``squall.spec.TestSpec``,
``workloads.WorkloadSpec``, ``squall.cluster.inventory.InventoryFile``,
``squall.campaign.CampaignFile``); the ``[nemesis]`` table and schedule.json are modelled
here, because the nemesis package imports only the standard library. ``python -m
squall.schemas`` writes their JSON Schemas to ``docs/schemas/``.
"""

from squall.config.errors import ConfigurationError, field_path, validate
from squall.config.fields import ConfigModel, Count, NonNegative, Seconds, Seed, Text, one_of
from squall.config.nemesis_table import NemesisTable, NetemTable, ScheduleSpecTable
from squall.config.overrides import set_path
from squall.config.toml_file import parse_toml, read_toml

__all__ = [
    "ConfigModel",
    "ConfigurationError",
    "Count",
    "NemesisTable",
    "NetemTable",
    "NonNegative",
    "ScheduleSpecTable",
    "Seconds",
    "Seed",
    "Text",
    "field_path",
    "one_of",
    "parse_toml",
    "read_toml",
    "set_path",
    "validate",
]
