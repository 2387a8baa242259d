"""run.log keeps what squall and the queue's client say during a run, out of the terminal."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from squall.run_log import RUN_LOG, run_log


def test_client_warnings_and_squall_s_own_story_go_to_run_log_not_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    handlers = list(root.handlers)
    with run_log(tmp_path) as path:
        logging.getLogger("system_under_test.client.sender").warning(
            "producer connection to %s dropped: %s", "n1:9092", "reset"
        )
        logging.getLogger("system_under_test.client.consumer").warning(
            "squall-queue-0: offset 3830 out of range; reset to earliest offset 0"
        )
        logging.getLogger("squall.runner").info("run ended: no verdict")
        logging.getLogger("some.library").info("chatter nobody needs")
    assert path == tmp_path / RUN_LOG
    text = path.read_text()
    assert "WARNING system_under_test.client.sender" in text and "n1:9092 dropped" in text
    assert "offset 3830 out of range; reset to earliest offset 0" in text
    assert "INFO squall.runner" in text and "chatter" not in text
    assert capsys.readouterr().err == ""  # Python's last-resort handler printed nothing
    assert root.handlers == handlers  # detached again
    assert logging.getLogger("squall").level == logging.NOTSET
