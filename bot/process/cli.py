"""tracegate: trace-verified incident answers and gated Kubernetes actions, from Slack."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.process.logs import configure_logging
from bot.process.settings import Settings, SettingsError, load_settings
from bot.process.settings_docs import render as render_settings_page
from graph.config import ConfigError

if TYPE_CHECKING:
    from gates.audit import AuditReport
    from gates.model import ActionRequest
    from graph.runner import InvestigationResult


async def _investigate(
    settings: Settings, args: argparse.Namespace
) -> tuple[InvestigationResult, list[ActionRequest]]:
    """The result, and the actions it proposed as stored (their state, not the model's)."""
    from bot.process.runtime import open_runtime

    async def progress(event: dict[str, Any]) -> None:
        if not args.json and event["type"] in ("tool_started", "verification_finished"):
            details = {k: v for k, v in event.items() if k not in ("type", "at_ms")}
            print(f"… {event['type']} {json.dumps(details)}", file=sys.stderr)

    async with open_runtime(settings) as runtime:
        result = await runtime.investigator.investigate(
            args.thread, args.question, args.user, on_progress=progress
        )
        if runtime.actions is None:
            return result, []
        return result, [await runtime.actions.store.get(i) for i in result.action_request_ids]


def _print_result(result: InvestigationResult, actions: list[ActionRequest], as_json: bool) -> None:
    from graph.action_claims import true_state

    if as_json:
        print(result.model_dump_json(indent=2))
        return
    print(result.answer)
    for notice in result.notices:
        print(f"\nnote: {notice}")
    for request in actions:
        print(f"\nproposed action {request.id}: {request.describe()} — {true_state(request)}")
    print(
        f"\n[{result.status}] tool calls {result.tool_calls}, traces verified "
        f"{len(result.verified_trace_ids)} / unverified {len(result.unverified_trace_ids)} / "
        f"removed {len(result.removed_trace_ids)}, "
        + (
            f"rubric {result.rubric_status} after {result.rubric_passes} pass(es), "
            if result.rubric_status
            else ""
        )
        + f"{result.duration_s:.1f}s, thread {result.thread_id}"
    )


def _demo(args: argparse.Namespace) -> int:
    # Imported here, not at load: only the demo needs the simulators and fakeredis.
    from bot.process.demo import SCENES, play

    names = [name for name, *_ in SCENES]
    if unknown := [s for s in args.scene or [] if s not in names]:
        print(
            f"tracegate demo: no scene {', '.join(map(repr, unknown))}; "
            f"the scenes are {', '.join(names)}",
            file=sys.stderr,
        )
        return 2
    redis_url = os.environ.get("REDIS_URL") or None  # None: the embedded in-memory store
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    api_key = os.environ.get("GOOGLE_API_KEY") or None
    folder = Path(args.out).resolve()
    try:
        asyncio.run(
            play(
                redis_url,
                sys.stdout,
                folder,
                api_key=api_key,
                scenes=args.scene,
                interactive=args.interactive,
            )
        )
    except KeyboardInterrupt:
        print("tracegate demo: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports a job ended by Ctrl-C
    return 0


async def _migrate_checkpoints(settings: Settings, keep: bool) -> None:
    from bot.process.redis_client import connect_redis
    from graph.checkpoint_migration import migrate_checkpoints

    async with contextlib.aclosing(connect_redis(settings.redis_spec())) as redis:
        report = await migrate_checkpoints(redis, settings.redis.prefix, keep=keep)
    print(f"tracegate migrate-checkpoints ({settings.redis.prefix}:…): {report.summary()}")


def _evaluate(argv: list[str]) -> int:
    """`tracegate eval`, from a checkout: the image carries no `evals` (docs/operating.md)."""
    try:
        from evals.cli import add_arguments
        from evals.cli import main as evaluate_main
    except ModuleNotFoundError as exc:
        if exc.name != "evals":
            raise
        print(
            "tracegate eval: the evals package is not installed (the image leaves it out); "
            "run `tracegate eval` from a checkout of the repository (make install)",
            file=sys.stderr,
        )
        return 2
    parser = argparse.ArgumentParser(
        prog="tracegate eval", description="Measure how often answers find the real cause."
    )
    add_arguments(parser)
    return evaluate_main(parser.parse_args(argv))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tracegate",
        description=__doc__,
        epilog="Settings come from the environment (or .env); see docs/configuration.md. "
        "Exit status 2: a setting, Redis or the Kubernetes config is not usable.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    ask = commands.add_parser(
        "investigate", help="ask one question from the terminal (same graph as the bot)"
    )
    ask.add_argument("question")
    ask.add_argument("--thread", default=None, help="continue this thread id (default: a new one)")
    ask.add_argument("--user", default="cli", help="who is asking (recorded in the checkpoint)")
    ask.add_argument("--json", action="store_true", help="print the whole result as JSON")
    commands.add_parser("serve", help="run the Slack app (HTTP on PORT, or Socket Mode)")
    commands.add_parser("worker", help="run turns from the queue (WORKER_MODE=queue)")
    migrate = commands.add_parser(
        "migrate-checkpoints", help="copy checkpoints written before REDIS_PREFIX covered them"
    )
    migrate.add_argument("--keep", action="store_true", help="leave the old keys in place")
    audit = commands.add_parser("audit", help="the audit stream (docs/actions.md)")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)
    audit_commands.add_parser(
        "verify", help="check its hash chain: exit 0 intact, 1 not, 2 no Redis"
    )
    demo = commands.add_parser(
        "demo", help="play whole incidents against simulated Slack, Tempo, Kubernetes (and Gemini)"
    )
    demo.add_argument("--interactive", action="store_true", help="type your own questions")
    demo.add_argument("--out", default="demo-blocks", help="folder for the Block Kit JSON")
    demo.add_argument("--scene", action="append", help="play only this scenario (repeatable)")
    # Its own arguments are parsed by `_evaluate`: `evals` is imported for `tracegate eval`
    # only, and the image leaves it out (docs/operating.md), so no other command may need it.
    commands.add_parser(
        "eval",
        help="measure how often answers find the real cause (evals/scenarios)",
        add_help=False,
    )
    config = commands.add_parser("config", help="about the settings themselves")
    config_commands = config.add_subparsers(dest="config_command", required=True)
    docs = config_commands.add_parser(
        "docs", help="write docs/configuration.md from the settings model (make docs)"
    )
    docs.add_argument("--out", type=Path, help="write the page here (default: print it)")
    args, rest = parser.parse_known_args(argv)
    if args.command == "eval":
        return _evaluate(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")

    if args.command == "config":
        # The settings page, from the model alone: no environment, no .env, no secret shown.
        page = render_settings_page()
        if args.out is None:
            sys.stdout.write(page)
        else:
            args.out.write_text(page)
            print(f"tracegate config docs: wrote {args.out}", file=sys.stderr)
        return 0

    if args.command == "demo":
        return _demo(args)
    try:
        if args.command == "migrate-checkpoints":
            return _run(load_settings(), args)
        if args.command == "audit":
            return _verify_audit(load_settings())
        settings = load_settings(args.command)
        configure_logging(settings.logs.level, settings.logs.format)
        return _run(settings, args)
    except (SettingsError, ConfigError) as exc:
        print(f"tracegate: configuration error\n{exc}", file=sys.stderr)
        return 2


def _verify_audit(settings: Settings) -> int:
    """`tracegate audit verify`: check the audit stream's hash chain (gates/audit.py).

    Exit 0: intact (entries written before the chain are reported, not failed); 1: a changed,
    inserted or missing entry, each named; 2: Redis cannot be read (REDIS_URL)."""
    from redis.exceptions import RedisError

    from bot.process.redis_client import connect_redis, redacted
    from gates.audit import AuditKeys, read_and_verify

    async def verify() -> AuditReport:
        async with contextlib.aclosing(connect_redis(settings.redis_spec())) as redis:
            return await read_and_verify(redis, settings.redis.prefix)

    stream = AuditKeys.of(settings.redis.prefix).stream
    try:
        report = asyncio.run(verify())
    except RedisError as exc:
        print(
            f"tracegate audit verify: cannot read {stream} from Redis at REDIS_URL "
            f"({redacted(settings.redis.url)}): {exc}",
            file=sys.stderr,
        )
        return 2
    print(f"tracegate audit verify ({stream}):")
    for line in report.lines():
        print(f"  {line}")
    return 0 if report.intact else 1


def _run(settings: Settings, args: argparse.Namespace) -> int:
    # Imported here, not at load: the runtime (the graph, the model's client, the queue, the
    # Kubernetes client) costs seconds of CPU, which a process whose settings are refused
    # never spends.
    from redis.exceptions import RedisError

    from bot.process.redis_policy import RedisUnusable
    from bot.process.server import run_worker, serve
    from gates.cluster import ClusterError

    commands = {
        "migrate-checkpoints": lambda: _migrate_checkpoints(settings, args.keep),
        "serve": lambda: serve(settings),
        "worker": lambda: run_worker(settings),
    }
    try:
        if args.command in commands:
            asyncio.run(commands[args.command]())
            return 0
        args.thread = args.thread or f"cli:{uuid.uuid4().hex}"
        result, actions = asyncio.run(_investigate(settings, args))
    except RedisUnusable as exc:  # (a ConfigError is main's to report)
        print(f"tracegate: {exc}", file=sys.stderr)
        return 2
    except RedisError as exc:
        print(f"tracegate: cannot use Redis at REDIS_URL: {exc}", file=sys.stderr)
        return 2
    except ClusterError as exc:
        print(f"tracegate: cannot use the Kubernetes API (KUBECONFIG): {exc}", file=sys.stderr)
        return 2
    _print_result(result, actions, args.json)
    return 1 if result.status == "failed" else 0


if __name__ == "__main__":
    sys.exit(main())
