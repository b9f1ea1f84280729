"""Grounding precision and recall over the answer corpora (bench/grounding_corpus.py).

The evidence is what the real tools return against the simulators loaded with the demo's
two incidents at a fixed clock (so stated times stay true run after run): every error
trace and two healthy ones fetched with `get_trace`, one search, and the rollout history
of the three Deployments. Each answer then goes through the grounding check, live look-ups
included (the same simulators answer them).

- precision: correct answers that pass with no claim removed or marked (target: all);
- recall: answers with one invented fact in which that fact is caught (target: >= 95%).

`python -m bench.grounding` prints the figures and writes them into BENCHMARKS.md.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench import grounding_answers, grounding_second, grounding_worlds
from bench.grounding_answers import WRITERS, RandomPick, truth_of
from bench.grounding_corpus import CORRECT, INVENTED, Answer
from bench.harness import write_section
from gates.cluster import KubernetesCluster
from graph.config import TempoSpec
from graph.grounding.check import ClaimCheck
from graph.grounding.claims import find_claims
from graph.grounding.evidence import Fact
from graph.grounding.guard import ground_draft
from graph.grounding.sources import LiveSources
from graph.tools.kubernetes import rollout_facts
from graph.tools.tempo import TempoClient, tempo_tools
from sandbox.kubernetes import KubernetesSimulator, write_kubeconfig
from sandbox.scenarios import bad_deploy, db_overload
from sandbox.tempo import TempoSimulator

# the incidents' clock: the traces end just before it, the rollouts are hours before
NOW = datetime(2026, 11, 30, 14, 10, tzinfo=UTC).timestamp()
TOLERANCE_S = 300
OUT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
BEGIN, END = "<!-- grounding: begin -->", "<!-- grounding: end -->"


@dataclass(frozen=True)
class World:
    facts: list[Fact]
    sources: LiveSources
    tool_texts: list[str]
    kube: KubernetesSimulator
    tempo: TempoSimulator


def deployments(kube: KubernetesSimulator) -> None:
    """The demo's Deployments, and checkout's, at the corpus clock."""
    payment = [f"registry/payment-api:{v}" for v in ("1.40.2", "1.41.3", "1.42.0")]
    kube.add_deployment("shop", "payment-api", payment, replicas=4, first_revision=40, now=NOW)
    orders = ["registry/orders-api:2.6.0", "registry/orders-api:2.7.0"]
    kube.add_deployment(
        "shop", "orders-api", orders, replicas=6, first_revision=6, spacing_h=48, now=NOW
    )
    checkout = ["registry/checkout:3.3.2", "registry/checkout:3.4.0"]
    kube.add_deployment("shop", "checkout", checkout, first_revision=17, spacing_h=24, now=NOW)


@asynccontextmanager
async def corpus_world() -> AsyncIterator[World]:
    checkout, orders = bad_deploy(NOW), db_overload(NOW)
    traces = checkout.traces + orders.traces
    with tempfile.TemporaryDirectory() as folder:
        async with TempoSimulator(traces=traces) as tempo, KubernetesSimulator() as kube:
            deployments(kube)
            config = write_kubeconfig(Path(folder) / "kubeconfig", kube.url)
            cluster = await KubernetesCluster.connect(str(config), timeout_s=5.0)
            client = TempoClient(TempoSpec(url=tempo.url))
            try:
                facts, texts = await _evidence(client, cluster, checkout.error_trace_ids)
                wanted = [orders.error_trace_ids[0], checkout.traces[2].trace_id]
                more, more_texts = await _traces(client, wanted)
                sources = LiveSources(cluster, client, ["shop"])
                yield World(facts + more, sources, texts + more_texts, kube, tempo)
            finally:
                await client.aclose()
                await cluster.close()


async def _traces(client: TempoClient, ids: list[str]) -> tuple[list[Fact], list[str]]:
    get_trace = {t.name: t for t in tempo_tools(client)}["get_trace"]
    facts: list[Fact] = []
    texts: list[str] = []
    for trace_id in ids:
        message = await get_trace.ainvoke(
            {
                "type": "tool_call",
                "id": trace_id,
                "name": "get_trace",
                "args": {"trace_id": trace_id},
            }
        )
        texts.append(str(message.content))
        facts += message.artifact or []
    return facts, texts


async def _evidence(
    client: TempoClient, cluster: KubernetesCluster, error_ids: list[str]
) -> tuple[list[Fact], list[str]]:
    facts, texts = await _traces(client, error_ids)
    search = {t.name: t for t in tempo_tools(client)}["query_tempo_traces"]
    minutes = int((time.time() - NOW) / 60) + 30
    args = {"traceql": "{ status = error }", "since_minutes_ago": minutes, "limit": 30}
    message = await search.ainvoke(
        {"type": "tool_call", "id": "s", "name": search.name, "args": args}
    )
    texts.append(str(message.content))
    facts += message.artifact or []
    for name in ("payment-api", "orders-api", "checkout"):
        snap = await cluster.snapshot("shop", name)
        facts += rollout_facts("shop", name, snap, f"get_rollout_history shop/{name}")
    return facts, texts


@dataclass(frozen=True)
class Outcome:
    answer: Answer
    checks: list[ClaimCheck]

    @property
    def clean(self) -> bool:
        return all(c["status"] == "grounded" for c in self.checks)

    @property
    def caught(self) -> bool:
        """The invented value is a claim the check did not ground."""
        invented = (self.answer.invented or "").lower()
        return any(c["status"] != "grounded" and invented in c["text"].lower() for c in self.checks)


async def run_corpus(world: World, answers: list[Answer]) -> list[Outcome]:
    outcomes = []
    for answer in answers:
        _, checks = await ground_draft(answer.text, world.facts, world.sources, TOLERANCE_S)
        outcomes.append(Outcome(answer, checks))
    return outcomes


def rows(name: str, correct: list[Outcome], invented: list[Outcome]) -> list[str]:
    """The precision and recall rows of one pair of corpora."""
    clean = sum(o.clean for o in correct)
    caught = sum(o.caught for o in invented)
    facts = sum(len(o.checks) for o in correct)
    kinds = sorted({o.answer.kind or "" for o in invented})
    by_kind = ", ".join(
        f"{k} {sum(o.caught for o in invented if o.answer.kind == k)}/"
        f"{sum(o.answer.kind == k for o in invented)}"
        for k in kinds
    )
    return [
        f"| {name}: correct answers (precision) | {len(correct)} ({facts} facts) | "
        f"{clean}/{len(correct)} posted with 0 claims removed or marked | all |",
        f"| {name}: one invented fact each (recall) | {len(invented)} | "
        f"{caught}/{len(invented)} caught ({100 * caught / max(1, len(invented)):.1f}%); "
        f"by kind: {by_kind} | ≥ 95% |",
    ]


# Text nobody writes but anyone can send (a Slack message, a span's status): each is read
# in one pass. 100 KB each; the baseline is as much ordinary answer text.
HOSTILE: dict[str, Callable[[int], str]] = {
    "'!' run": lambda n: "x" + "!" * n + "x",
    "'[' run": lambda n: "[" * n,
    "'[a](' run": lambda n: "[a](" * (n // 4),
    "spaces after 'pod'": lambda n: "pod" + " " * n + "!",
    "spaces after 'revision'": lambda n: "revision" + " " * n + "x",
    "'v1.1.1…x'": lambda n: "v1" + ".1" * (n // 2) + "x",
    "'a-a-a…'": lambda n: "a-" * (n // 2) + "a",
    "times '14:02 …'": lambda n: " ".join("14:02" for _ in range(n // 6)),
    "revision list": lambda n: "revision " + ", ".join(str(i) for i in range(n // 6)),
    "'a/a/…:1_'": lambda n: "a/" * (n // 2) + "a:1_",
}
SIZE = 100_000


def _timed_ms(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        find_claims(text)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def extraction_rows() -> list[str]:
    ordinary = " ".join(a.text for a in CORRECT)
    baseline = _timed_ms((ordinary * (SIZE // len(ordinary) + 1))[:SIZE])
    timed = {name: _timed_ms(make(SIZE)) for name, make in HOSTILE.items()}
    worst = max(timed, key=lambda name: timed[name])
    return [
        f"| claim extraction, {SIZE // 1000} KB | ordinary answers (baseline) | "
        f"{baseline:.0f} ms | 1.00× | |",
        f"| claim extraction, {SIZE // 1000} KB | worst of {len(HOSTILE)} hostile inputs "
        f"({worst}) | {timed[worst]:.0f} ms | {timed[worst] / baseline:.2f}× | linear: < 0.5 s |",
    ]


def report(table: list[str]) -> str:
    lines = [
        BEGIN,
        "## Grounding precision and recall",
        "",
        "Written by `python -m bench.grounding` (also run by `make bench`): the answers of",
        "`bench/grounding_corpus.py` checked against the evidence the real tools return from the",
        "simulators (the demo's incidents at a fixed clock), live look-ups included.",
        "",
        f"- when: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        "| corpus | answers | result | target |",
        "|---|---|---|---|",
        *table,
        "",
        "- first pair: `bench/grounding_corpus.py`, written against the incidents' tool outputs;",
        "  the checker was tuned on it.",
        "- second pair: `bench/grounding_second.py`, written by a reviewer who had not read the",
        "  first; its first run scored 55/57 and 46/51, and the checker was corrected after it, so",
        "  it is tuned on too (it was called held-out).",
        f"- property run: `bench/grounding_answers.py` writes {PER_KIND} answers per kind in each",
        "  of the 16 eval worlds (a seeded draw), from the evidence the real tools gathered there",
        "  (`bench/grounding_worlds.py`), live look-ups against the same simulators: precision =",
        "  true answers with no claim flagged; recall = near misses not posted as grounded",
        "  (ungrounded, or unchecked and marked). `make test` runs the same property with",
        "  Hypothesis, 25 examples per kind (tests/test_grounding_properties.py).",
        '- Counts and percentages are not claims (out of scope): an invented "12 of 14" is not',
        '  caught by design; nor are bare numbers ("from 42 to 38") or two-part versions',
        '  ("1.43"), and a time within `GROUNDING_TIME_TOLERANCE` of one in the evidence passes.',
        END,
    ]
    return "\n".join(lines)


def write(section: str) -> None:
    write_section(OUT, BEGIN, END, section)


async def measure() -> str:
    table: list[str] = []
    async with corpus_world() as world:
        pairs = [("first", CORRECT, INVENTED)]
        pairs.append(("second", grounding_second.CORRECT, grounding_second.INVENTED))
        for name, good, bad in pairs:
            correct = await run_corpus(world, good)
            invented = await run_corpus(world, bad)
            for o in correct:
                if not o.clean:
                    flagged = [c for c in o.checks if c["status"] != "grounded"]
                    print("NOT CLEAN:", o.answer.style, flagged)
            for o in invented:
                if not o.caught:
                    print("MISSED:", o.answer.kind, o.answer.invented, o.answer.text[:100])
            table += rows(name, correct, invented)
    return report(table + extraction_rows() + await property_rows())


PER_KIND = 12  # answers per kind and world in the property run


async def property_rows() -> list[str]:
    """Precision and recall per kind over answers written from every eval world's evidence."""
    totals: dict[str, list[int]] = {}
    for name in grounding_worlds.names():
        async with grounding_worlds.opened(name) as (seen, sources):
            truth = truth_of(seen.facts, seen.namespace)
            for kind in WRITERS:
                pick = RandomPick(sum(map(ord, name + kind)))
                for _ in range(PER_KIND):
                    written = grounding_answers.answer(pick, truth, seen.now, kind)
                    if written is None:
                        continue
                    row = totals.setdefault(kind, [0, 0, 0])
                    row[0] += 1
                    _, good = await ground_draft(written.true, seen.facts, sources, TOLERANCE_S)
                    row[1] += all(c["status"] == "grounded" for c in good)
                    _, bad = await ground_draft(written.invented, seen.facts, sources, TOLERANCE_S)
                    values = [v.lower() for v in (written.value, written.also) if v]
                    row[2] += any(
                        c["status"] != "grounded"
                        and any(v in c["text"].lower() or c["text"].lower() in v for v in values)
                        for c in bad
                    )
    return [
        f"| property run, {kind} | {n} true, {n} near misses | precision {clean}/{n}, "
        f"recall {caught}/{n} ({100 * caught / max(1, n):.1f}%) | all; ≥ 95% |"
        for kind, (n, clean, caught) in sorted(totals.items())
    ]


def main() -> None:
    section = asyncio.run(measure())
    write(section)
    print(section)


if __name__ == "__main__":
    main()
