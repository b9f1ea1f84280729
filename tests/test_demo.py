"""`tracegate demo`: each scenario end to end, through the real server and simulators."""

import asyncio
import io
import json
import os
import re
import signal
import sys
import tempfile
from pathlib import Path

import pytest
from matplotlib.image import imread

from bot.process.demo import play
from sandbox import GeminiRequest, GeminiSimulator, Reply
from sandbox.plays import INVENTED_TRACE, INVENTED_VERSION, replay_agent, replay_grader
from sandbox.slack import block_problems

HEX32 = re.compile(r"\b[0-9a-f]{32}\b")


def replay_grader_or_agent(request: GeminiRequest) -> Reply:
    """One model for agent and grader: tell them apart by the grader's verdict tool."""
    return (
        replay_grader(request) if "SubmitVerdict" in request.tool_names else replay_agent(request)
    )


async def _play(redis_url: str, scene: str, folder: Path) -> tuple[str, object]:
    out = io.StringIO()
    world, _ = await play(redis_url, out, folder, scenes=[scene])
    return out.getvalue(), world


async def test_bad_deploy_is_answered_approved_and_rolled_back(
    redis_url: str, tmp_path: Path
) -> None:
    transcript, world = await _play(redis_url, "bad-deploy", tmp_path)

    assert "scripted replay" in transcript.splitlines()[0]
    assert "Likely cause (high confidence):* `payment-api` revision 42" in transcript
    cited = set(HEX32.findall(transcript))
    stored = {t.trace_id for t in world.tempo._traces.values()}  # type: ignore[attr-defined]
    assert cited and cited <= stored  # real IDs only
    assert "[Approve]  [Reject]" in transcript
    assert "Succeeded (approved by @U_LEAD): rolled back shop/payment-api to revision 41" in (
        unwrapped(transcript)
    )
    deployment = world.kube.deployments[("shop", "payment-api")]  # type: ignore[attr-defined]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].endswith("1.41.3")
    assert "*Rubric for that thread:* satisfied" in transcript


async def test_the_demo_answers_with_a_live_task_timeline(redis_url: str, tmp_path: Path) -> None:
    transcript, _ = await _play(redis_url, "bad-deploy", tmp_path)

    first = transcript.split("🤖 tracegate (streamed):", 1)[1].split("👤", 1)[0]
    steps = [ln.strip() for ln in first.splitlines() if ln.strip().startswith(("✓", "✗"))]
    assert steps[0] == "✓ Reading the thread"
    assert steps[1].startswith("✓ Searching Tempo:") and steps[1].endswith("traces")
    assert any(s.startswith("✓ Checking 1 trace ID in Tempo") for s in steps)
    assert any(s.startswith("✓ Grading against the rubric (pass 2) — satisfied") for s in steps)
    assert "Likely cause (high confidence)" in first  # the answer, under its timeline


async def test_not_a_deploy_is_refused_by_the_judge_and_the_thread_says_why(
    redis_url: str, tmp_path: Path
) -> None:
    transcript, world = await _play(redis_url, "not-a-deploy", tmp_path)

    assert "Refused by judge: The traces show Postgres connection-pool exhaustion" in (
        unwrapped(transcript)
    )
    assert "The rollback I proposed was refused by the reviewer" in transcript
    assert world.kube.writes == []  # type: ignore[attr-defined]


def unwrapped(transcript: str) -> str:
    """The transcript with its wrapped lines joined again (continuations are indented
    past the line's bullet: six spaces or more)."""
    return re.sub(r"\n {6,}", " ", transcript)


async def test_an_invented_trace_is_sent_back_and_never_posted(
    redis_url: str, tmp_path: Path
) -> None:
    _, world = await _play(redis_url, "hallucination", tmp_path)

    posted = [f"{m.text}{m.blocks}" for m in world.slack.messages.values()]  # type: ignore[attr-defined]
    assert posted and all(INVENTED_TRACE not in message for message in posted)
    feedback = world.gemini.requests[1].text()  # type: ignore[attr-defined]
    assert f"do not exist in Tempo: {INVENTED_TRACE}" in feedback


async def test_the_steps_view_names_the_invented_trace_and_what_the_guard_did(
    redis_url: str, tmp_path: Path
) -> None:
    transcript, _ = await _play(redis_url, "hallucination", tmp_path)
    steps = unwrapped(transcript).split("clicks [Steps]")[1]

    assert (
        "trace guard: 0 found, 1 missing, 0 unverified; not in Tempo, sent back to the agent: "
        f"{INVENTED_TRACE}" in steps
    )
    assert (
        "trace guard: 1 found, 0 missing, 0 unverified; corrected after being sent back: "
        f"{INVENTED_TRACE}" in steps
    )


async def test_an_invented_version_is_caught_and_the_corrected_answer_posted(
    redis_url: str, tmp_path: Path
) -> None:
    transcript, world = await _play(redis_url, "hallucination", tmp_path)
    answer, steps = unwrapped(transcript).split("clicks [Steps]")

    assert INVENTED_VERSION not in answer and "`payment-api` 1.42.0 fails" in answer
    assert "facts: 2 checked, 2 grounded, 0 unchecked, 1 draft sent back" in answer
    assert f"version {INVENTED_VERSION}: ungrounded" in steps
    assert "version 1.42.0: grounded — get_trace" in steps
    feedback = world.gemini.requests[3].text()  # type: ignore[attr-defined]
    assert f"version '{INVENTED_VERSION}': " in feedback
    assert f"rollout history has no {INVENTED_VERSION}; the evidence holds 1.42.0" in feedback


async def test_the_answer_footer_counts_the_draft_the_trace_guard_sent_back(
    redis_url: str, tmp_path: Path
) -> None:
    transcript, _ = await _play(redis_url, "hallucination", tmp_path)
    answer = unwrapped(transcript).split("clicks [Steps]")[0]

    assert "traces: 1 verified, 0 unverified, 0 removed, 1 draft sent back" in answer


async def test_the_footer_counts_the_draft_the_grader_sent_back(
    redis_url: str, tmp_path: Path
) -> None:
    transcript, _ = await _play(redis_url, "bad-deploy", tmp_path)
    assert "rubric: satisfied after 1 revision" in unwrapped(transcript)


async def test_the_block_kit_of_every_message_is_written_and_valid(
    redis_url: str, tmp_path: Path
) -> None:
    await _play(redis_url, "bad-deploy", tmp_path)
    files = sorted((tmp_path / "bad-deploy").glob("*.json"))
    assert len(files) >= 4
    for path in files:
        assert block_problems(json.loads(path.read_text())["blocks"]) == []


async def _interactive_demo(redis_url: str, folder: Path) -> asyncio.subprocess.Process:
    """`tracegate demo --interactive` as a process, its three streams piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-P",  # not the working folder's modules first: /tmp holds anything
        "-m",
        "bot.process.cli",
        "demo",
        "--interactive",
        "--out",
        str(folder),
        env={"PATH": os.environ["PATH"], "REDIS_URL": redis_url},
        cwd=tempfile.gettempdir(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def test_interactive_questions_and_approvals_at_the_prompt(
    redis_url: str, tmp_path: Path
) -> None:
    process = await _interactive_demo(redis_url, tmp_path)
    out, err = await process.communicate(b"checkout fails, please fix it\napprove\nquit\n")

    text = out.decode()
    assert process.returncode == 0, err.decode()
    assert "👤 U_ONCALL: @tracegate checkout fails, please fix it" in text
    assert "👤 U_LEAD: clicks [Approve]" in text
    assert "Succeeded (approved by @U_LEAD)" in unwrapped(text)


async def test_ctrl_c_at_the_interactive_prompt_exits_130_with_one_line(
    redis_url: str, tmp_path: Path
) -> None:
    process = await _interactive_demo(redis_url, tmp_path)  # stdin kept open: it waits
    assert process.stdout is not None and process.stderr is not None
    try:
        line = b"?"
        while line and b"Type a question" not in line:
            line = await process.stdout.readline()
        assert line, "the demo ended before its prompt"
        process.send_signal(signal.SIGINT)
        # A hang fails here, not the suite; the bound is generous, not a speed check.
        code = await asyncio.wait_for(process.wait(), timeout=60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

    assert code == 130
    assert (await process.stderr.read()).decode() == "tracegate demo: interrupted\n"


async def test_without_redis_the_demo_runs_on_an_embedded_store_and_says_so(
    tmp_path: Path,
) -> None:
    out = io.StringIO()
    await play(None, out, tmp_path, scenes=["hallucination"])
    transcript = out.getvalue()
    assert "Conversations: embedded in-memory store (no Redis found" in transcript
    assert "trace guard: 1 found, 0 missing" in transcript


async def test_with_an_api_key_the_demo_uses_the_configured_gemini_models(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No network here: GEMINI_BASE_URL points "real" Gemini at the simulator, which answers
    # with the generic replay under the default model name.
    async with GeminiSimulator() as gemini:
        gemini.script(*[replay_grader_or_agent] * 60)
        monkeypatch.setenv("GEMINI_BASE_URL", gemini.url)
        out = io.StringIO()
        await play(redis_url, out, tmp_path, api_key="a-real-key", scenes=["hallucination"])
    transcript = out.getvalue()
    assert "Gemini is real (google_genai:gemini-3.8-flash)" in transcript.splitlines()[0]
    assert {r.model for r in gemini.requests} == {"gemini-3.8-flash"}
    assert "Likely cause (replayed" in transcript


async def test_a_run_leaves_only_its_own_block_kit_files(redis_url: str, tmp_path: Path) -> None:
    await _play(redis_url, "hallucination", tmp_path)
    (tmp_path / "notes.txt").write_text("not the demo's")
    await _play(redis_url, "not-a-deploy", tmp_path)

    assert not (tmp_path / "hallucination").exists()
    assert list((tmp_path / "not-a-deploy").glob("*.json"))
    assert (tmp_path / "notes.txt").read_text() == "not the demo's"


async def test_the_alert_scene_answers_in_the_alert_s_thread_before_anyone_asks(
    redis_url: str, tmp_path: Path
) -> None:
    out = io.StringIO()
    world, _ = await play(redis_url, out, tmp_path, scenes=["alert-fires"])
    (alert,) = [m for m in world.slack.messages.values() if m.thread_ts is None]
    thread = world.slack.thread(alert.channel, alert.ts)
    replies = [m for m in thread if m.ts != alert.ts and not m.files]  # the charts apart
    assert "CheckoutErrorRate" in str(alert.blocks)
    assert len(replies) == 1 and "revision 42" in replies[0].text
    # nobody asked: no person wrote anywhere, in the alert's thread or out of it
    assert list(world.slack.others.values()) == []


async def test_the_alert_scene_posts_a_chart_marking_the_rollout_and_the_alerts_start(
    redis_url: str, tmp_path: Path
) -> None:
    world, _ = await play(redis_url, io.StringIO(), tmp_path, scenes=["alert-fires"])
    (alert,) = [m for m in world.slack.messages.values() if m.thread_ts is None]
    metric, _trace = world.slack.files_in(alert.channel, alert.ts)
    assert metric.data is not None
    pixels = imread(io.BytesIO(metric.data), format="png")  # it decodes, at its size
    assert pixels.shape[:2] == (528, 1100)
    assert (tmp_path / "alert-fires" / "03-chart-metric.png").read_bytes() == metric.data
    (rs,) = [
        rs
        for (ns, name), rs in world.kube.replicasets.items()
        if ns == "shop"
        and name.startswith("payment-api-")
        and rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "42"
    ]
    rolled_out = rs["metadata"]["creationTimestamp"][11:19]  # HH:MM:SS
    assert f"Marker: payment-api rev 42 rolled out at {rolled_out} UTC." in metric.alt_txt
    started = re.search(r"\*started:\* \S+ (\d\d:\d\d) UTC", json.dumps(alert.blocks))
    assert started is not None
    assert f"Marker: alert CheckoutErrorRate started at {started.group(1)}:" in metric.alt_txt


def test_the_readme_shows_a_chart_as_the_demo_draws_it() -> None:
    root = Path(__file__).resolve().parent.parent
    (shown,) = re.findall(
        r"!\[[^\]]+\]\((docs/images/[^)]+\.png)\)", (root / "README.md").read_text()
    )
    pixels = imread(root / shown, format="png")
    assert pixels.shape[:2] == (528, 1100)  # the demo's metric chart, as its test reads it
