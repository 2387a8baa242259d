"""The ``squall`` command line as a whole: every help page renders, bad choices are usage
errors (exit 2), and the exit codes are the documented ones."""

from __future__ import annotations

from typing import Any, get_args

import pytest
import typer
from typer.testing import CliRunner

import squall.commands.console
from squall.cli import app, main
from squall.cluster.runtimes import RUNTIMES
from squall.commands.choices import Acks, ExpectedLossName, LoaderName, ProducerMode, RuntimeName
from squall.exit_codes import ExitCode

runner = CliRunner()


def _command_paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and subcommand under ``command``, as the words that invoke it (typer
    vendors its own click, so groups are recognised by their ``commands``)."""
    paths = [path]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        paths += _command_paths(sub, (*path, name))
    return paths


COMMANDS = _command_paths(typer.main.get_command(app))


def test_the_walk_finds_every_command() -> None:
    names = {" ".join(path) for path in COMMANDS}
    expected = {
        "broker",
        "topic create",
        "topic describe",
        "topic elect-leaders",
        "produce",
        "consume",
        "perf produce",
        "demo",
        "check",
        "run",
        "cluster up",
        "clean",
    }
    assert expected <= names


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "squall")
def test_every_help_page_renders(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["produce", "--topic", "t", "--acks", "2"],
        ["produce", "--topic", "t", "--acks", "any"],
        ["produce", "--topic", "t", "--mode", "batch"],
        ["perf", "produce", "--topic", "t", "--acks", "-2"],
        ["perf", "produce", "--topic", "t", "--mode", "fast"],
        ["check", ".", "--loader", "fast"],
        ["cluster", "up", "--runtime", "kubernetes"],
        ["run", "--runtime", "kubernetes"],
    ],
)
def test_an_invalid_choice_is_a_usage_error(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == ExitCode.USAGE
    option = args[-2]
    assert option in capsys.readouterr().err


@pytest.mark.parametrize(
    ("spelling", "acks"), [("0", 0), ("1", 1), ("-1", -1), ("all", -1), ("ALL", -1)]
)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_produce_takes_every_spelling_of_acks(
    monkeypatch: pytest.MonkeyPatch, spelling: str, acks: int, mode: str
) -> None:
    seen: dict[str, Any] = {}

    def produce_lines(*_args: Any, **kwargs: Any) -> tuple[int, int]:
        seen.update(kwargs)
        return 0, 0

    monkeypatch.setattr(squall.commands.console, "produce_lines", produce_lines)
    args = ["produce", "--topic", "t", "--acks", spelling, "--mode", mode]
    result = runner.invoke(app, args, input="")
    assert result.exit_code == 0, result.output
    assert seen["acks"] == acks
    assert type(seen["acks"]) is int
    assert seen["mode"] == mode


def test_exit_codes_are_the_documented_ones() -> None:
    assert [int(code) for code in ExitCode] == [0, 1, 2, 3, 130, 143]
    assert ExitCode["VALID"] is ExitCode["SUCCESS"]
    assert (ExitCode.ANOMALIES, ExitCode.USAGE, ExitCode.INFRASTRUCTURE) == (1, 2, 3)
    assert (ExitCode.INTERRUPTED, ExitCode.TERMINATED) == (130, 143)


def test_the_choices_match_what_they_choose_from() -> None:
    from checkers.config import EXPECTED_LOSSES, Loader

    assert tuple(RuntimeName) == RUNTIMES
    assert tuple(LoaderName) == get_args(Loader)
    assert tuple(ExpectedLossName) == EXPECTED_LOSSES
    assert [loader.literal for loader in LoaderName] == list(get_args(Loader))
    assert [loss.literal for loss in ExpectedLossName] == list(EXPECTED_LOSSES)
    assert [mode.literal for mode in ProducerMode] == ["sync", "async"]
    assert [int(acks) for acks in Acks] == [0, 1, -1, -1]
