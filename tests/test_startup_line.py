"""The one start-up line says who may approve actions."""

import logging

import pytest

from bot.process.logs import log_startup
from bot.process.settings import Settings


def test_the_start_up_line_names_who_may_approve(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(
        _env_file=None,
        tempo_url="http://127.0.0.1:1",
        action_approvers="U1,U2",
        action_approver_group="S1",
    )
    with caplog.at_level(logging.INFO, logger="tracegate"):
        log_startup(settings, "serving")

    (line,) = caplog.records
    assert "approvers: 2 users, group S1;" in line.getMessage()
    assert "NONE" not in line.getMessage()
