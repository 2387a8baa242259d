"""The ``squall`` command line as a whole: every help page renders, bad choices are usage
errors (exit 2), and the exit codes are the documented ones."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar, get_args

import pytest
import typer
from typer.testing import CliRunner

import squall.commands.console
from squall.cli import app, main
from squall.cluster.runtimes import RUNTIMES
from squall.commands.choices import Acks, ExpectedLossName, LoaderName, ProducerMode, RuntimeName
from squall.console_tools import ProduceTally
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
        "roundtrip",
        "runs",
        "serve",
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


def help_at_80_columns(*words: str, flag: str = "--help") -> str:
    result = runner.invoke(app, [*words, flag], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


# typer's own metavars (<bool>, <str>, <int range>, <list[str]>, ...) say nothing to a user
TYPE_METAVAR = re.compile(r"<(bool|str|int|float|path|list\[[^]]*\]|\w+ range)>")


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "squall")
def test_every_help_page_is_readable_at_80_columns(path: tuple[str, ...]) -> None:
    text = help_at_80_columns(*path)
    wide = [line for line in text.splitlines() if len(line) > 80]
    assert not wide, "\n".join(wide)
    assert not re.search(r"--[\w-]*…", text), text  # an option name cut short
    assert "…" not in text
    options = text.split("Options:", 1)[-1]
    assert not TYPE_METAVAR.search(options), text
    assert "-h, --help" in text
    assert help_at_80_columns(*path, flag="-h") == text


def test_every_option_that_takes_a_value_names_what_goes_there() -> None:
    """No option of any command shows typer's type in place of a metavar."""
    missing = []
    for path in COMMANDS:
        command = typer.main.get_command(app)
        for word in path:
            command = command.commands[word]  # type: ignore[attr-defined]
        for param in command.params:
            takes_value = param.param_type_name == "option" and not (
                param.is_flag or param.count  # type: ignore[attr-defined]
            )
            if takes_value and param.metavar is None and not param.hidden:  # type: ignore[attr-defined]
                missing.append(f"squall {' '.join(path)} {param.opts[0]}")
    assert not missing


def test_the_long_option_names_are_whole() -> None:
    text = help_at_80_columns("run")
    for option in (
        "--replication-factor N",
        "--min-insync-replicas N",
        "--unclean-leader-election / --no-unclean-leader-election",
        "--truncation leader-epoch|high-watermark",
        "--interval MIN,MAX",
        "--set KEY=VALUE",
        "--acks -1|0|1",
        "--time-limit SECONDS",
        "--store DIR",
        "--spark-master URL",
        "--faults NAME[=W],...",
        "--quiet",
    ):
        assert option in text, option
    assert "[default: store]" in text
    assert "[default: the spec's, else 60]" in " ".join(text.split())  # wrapped


def test_campaign_help_keeps_its_brackets() -> None:
    text = help_at_80_columns("campaign")
    for bracketed in ("[base]", "[matrix]", "[[case]]"):
        assert bracketed in text


def test_producer_acks_take_every_spelling_in_the_help() -> None:
    assert "--acks -1|0|1|all" in help_at_80_columns("produce")
    assert "--acks -1|0|1|all" in help_at_80_columns("perf", "produce")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == ExitCode.SUCCESS
    assert capsys.readouterr().out.strip() == f"squall {importlib.metadata.version('squall')}"


def test_shell_completion_is_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    text = help_at_80_columns()
    assert "--install-completion" in text
    assert "--show-completion" in text
    # Otherwise typer detects the shell from the process tree (none under some CI runners)
    # and takes "bash" for an extra argument.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    result = runner.invoke(app, ["--show-completion", "bash"])
    assert result.exit_code == 0, result.output
    assert "_SQUALL_COMPLETE" in result.output


class _FakeRunner:
    """Stands for squall.runner.TestRunner: records what it was given, runs nothing."""

    seen: ClassVar[dict[str, Any]] = {}

    def __init__(self, spec: Any, **kwargs: Any) -> None:
        _FakeRunner.seen.update(spec=spec, **kwargs)

    def run(self) -> Any:
        self.seen["console"].print("a live panel would be here")
        return SimpleNamespace(
            run_dir=SimpleNamespace(path=Path("store/queue/1")),
            exit_code=0,
            results={"valid": True},
            interrupted=False,
        )


@pytest.mark.parametrize("quiet", [[], ["--quiet"], ["-q"]])
def test_run_quiet_prints_only_the_final_json_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], quiet: list[str]
) -> None:
    import squall.runner

    monkeypatch.setattr(squall.runner, "TestRunner", _FakeRunner)
    assert main(["run", "--runtime", "local", "--faults", "none", *quiet]) == ExitCode.SUCCESS
    out, err = capsys.readouterr()
    assert json.loads(out) == {
        "run_dir": "store/queue/1",
        "exit_code": 0,
        "valid": True,
        "report": None,  # no report.html in store/queue/1
    }
    assert _FakeRunner.seen["console"].quiet is bool(quiet)
    assert ("live panel" in err) is not bool(quiet)


def test_hunt_json_prints_the_hunt_summary(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import squall.commands.hunt as hunt_command
    from squall.hunt import RunReport

    def run(_self: Any, _spec: Any, seed: int, _schedule: Any = None) -> RunReport:
        found = {"valid": False, "anomaly_types": ["lost-write"]}
        return RunReport.of(seed, str(tmp_path / "run"), found, exit_code=1, seconds=1.0)

    monkeypatch.setattr(hunt_command._Runs, "run", run)
    args = ["hunt", "--store", str(tmp_path), "--seed", "7", "--runtime", "local", "--json"]
    assert main([*args, "--quiet"]) == ExitCode.ANOMALIES
    out, err = capsys.readouterr()
    summary = json.loads(out)  # one JSON document, nothing else on stdout
    assert summary["seeds"] == [7]
    assert summary["detection"]["anomaly_types"] == ["lost-write"]
    assert Path(summary["hunt"]).name == "hunt.json"
    assert json.loads(Path(summary["hunt"]).read_text())["seeds"] == [7]
    assert err == ""


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

    def produce_lines(*_args: Any, **kwargs: Any) -> ProduceTally:
        seen.update(kwargs)
        return ProduceTally(0, 0)

    monkeypatch.setattr(squall.commands.console, "produce_lines", produce_lines)
    args = ["produce", "--topic", "t", "--acks", spelling, "--mode", mode]
    result = runner.invoke(app, args, input="")
    assert result.exit_code == 0, result.output
    assert seen["acks"] == acks
    assert type(seen["acks"]) is int
    assert seen["mode"] == mode


def test_produce_to_no_broker_is_squall_failure_not_failed_records() -> None:
    args = ["produce", "--topic", "t", "--bootstrap-server", "127.0.0.1:1"]
    result = runner.invoke(app, args, input="a\nb\n")
    assert result.exit_code == ExitCode.INFRASTRUCTURE, result.output
    assert "nothing was sent" in result.output and "connection refused" in result.output


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


def test_campaign_json_prints_the_summary(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import squall.campaign
    from squall.campaign import CaseResult

    def run_campaign(_path: Path, **_kwargs: Any) -> tuple[Path, list[CaseResult]]:
        results = [CaseResult("c-acks1", {"workload/acks": 1}, 1, False, ["lost-write"], "r", 2.0)]
        summary = {"campaign": "c", "file": "c.toml", "cases": [r.__dict__ for r in results]}
        (tmp_path / "summary.json").write_text(json.dumps(summary))
        return tmp_path, results

    monkeypatch.setattr(squall.campaign, "load_campaign", lambda _path, _overrides=None: ("c", []))
    monkeypatch.setattr(squall.campaign, "run_campaign", run_campaign)
    assert main(["campaign", str(tmp_path / "c.toml"), "--json"]) == ExitCode.ANOMALIES
    summary = json.loads(capsys.readouterr().out)
    assert summary["campaign"] == "c"
    assert summary["cases"][0]["anomaly_types"] == ["lost-write"]
    assert summary["summary"] == str(tmp_path / "summary.json")
    assert summary["junit"] == str(tmp_path / "junit.xml")
    assert summary["report"] == str(tmp_path / "report.html")


def test_the_top_help_lists_every_exit_code() -> None:
    text = " ".join(help_at_80_columns().split())
    for code in ExitCode:
        assert f"{int(code)} " in text, code
    assert "Per command: docs/exit-" in text  # click may break the path at its hyphen


def test_campaign_ends_by_naming_each_report_uncut_at_80_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import squall.campaign
    from squall.campaign import CaseResult

    run_dir = tmp_path / "a-store-directory-long-enough" / "demo-acks1" / "20261127T151744"
    run_dir.mkdir(parents=True)
    (run_dir / "report.html").write_text("<html></html>")
    said = "VALID, with losses the configuration allows: 761 acknowledged writes lost"
    results = [
        CaseResult(
            "demo-acks1", {}, 0, True, [], str(run_dir), 61.0,
            expected_anomaly_types=["lost-write", "unseen"], explanation=said,
            acknowledged_lost=761, allowed_lost=761,
        )
    ]  # fmt: skip

    def run_campaign(_path: Path, **_kwargs: Any) -> tuple[Path, list[CaseResult]]:
        return tmp_path, results

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(squall.campaign, "load_campaign", lambda _path, _overrides=None: ("c", []))
    monkeypatch.setattr(squall.campaign, "run_campaign", run_campaign)
    store = tmp_path / "a-store-directory-long-enough"
    assert main(["campaign", str(tmp_path / "c.toml"), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert f"  {run_dir / 'report.html'}" in lines  # on a line of its own, whole
    assert "761 acked writes lost (all allowed)" in " ".join(out.split())
    assert lines[-2] == f"campaign report: {tmp_path / 'report.html'}"
    assert lines[-1] == (
        f"browse the campaign's and every run's report: squall serve --store {store}"
    )
    assert not lines[-1].startswith("{")  # the last line is not raw JSON


def test_idempotence_and_group_flags_make_the_spec_or_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from squall.commands.run import spec_from_flags

    flags: dict[str, Any] = {
        "name": None,
        "runtime": "local",
        "nodes": None,
        "time_limit": None,
        "seed": None,
        "acks": None,
        "partitions": None,
        "replication_factor": None,
        "min_insync": None,
        "unclean": None,
        "truncation": None,
        "rate": None,
        "faults": None,
        "interval": None,
        "duration": None,
        "settings": [],
        "inventory": None,
    }
    spec = spec_from_flags(
        None, **flags, client="confluent-kafka", idempotence=True, producer_retries=4
    )
    assert (spec.workload.idempotence, spec.workload.producer_retries) == (True, 4)
    assert main(["run", "--runtime", "local", "--idempotence"]) == ExitCode.USAGE
    assert "set producer_retries >= 1" in capsys.readouterr().err
    assert spec_from_flags(None, **flags).workload.group_membership  # subscribe's default
    outside = spec_from_flags(None, **flags, group_membership=False).workload
    assert (outside.subscription, outside.group_membership) == ("subscribe", False)
    assign = spec_from_flags(None, **flags, subscription="assign").workload
    assert (assign.subscription, assign.group_membership) == ("assign", False)
    argv = ["run", "--runtime", "local", "--subscription", "assign", "--group-membership"]
    assert main(argv) == ExitCode.USAGE
    assert 'group_membership needs subscription = "subscribe"' in capsys.readouterr().err
