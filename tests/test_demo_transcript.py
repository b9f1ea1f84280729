"""The demo's transcript: Slack blocks wrapped for a terminal."""

from bot.outbound.blocks import context, section
from bot.outbound.transcript import WIDTH, render_blocks

LONG = (
    "Roll-back path: re-deploy 1.42.0 once the fix lands; the canary-analysis step "
    "and the post-rollout smoke-test both have to pass first, in that order."
)


def test_a_wrapped_context_line_shows_its_bullet_only_once() -> None:
    lines = render_blocks([context(LONG)], "").splitlines()

    assert len(lines) > 1
    assert lines[0].startswith("    · Roll-back path:")
    assert all(line.startswith("      ") and "·" not in line for line in lines[1:])


def test_lines_are_never_broken_at_a_hyphen() -> None:
    rendered = render_blocks([section(LONG * 3)], "")

    assert all(not line.endswith("-") for line in rendered.splitlines())
    assert "Roll-back" in rendered and "canary-analysis" in rendered


def test_a_wrapped_list_item_hangs_under_its_text() -> None:
    lines = render_blocks([section(f"• {LONG}")], "").splitlines()

    assert lines[0].startswith("    • Roll-back")
    assert len(lines) > 1 and all(line.startswith("      ") for line in lines[1:])
    assert all(len(line) <= WIDTH for line in lines)


def test_the_record_mark_and_rollout_light_show_as_the_emoji_slack_shows() -> None:
    rendered = render_blocks([context(":ledger: record · :large_green_circle: rolled out")], "")

    assert "📒 record" in rendered and "🟢 rolled out" in rendered
