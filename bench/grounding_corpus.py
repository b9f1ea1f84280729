"""Answers for the grounding benchmark, written against the simulators' incidents.

CORRECT answers cite only what the tools show; each INVENTED answer states one fact no
evidence holds (`invented`, of `kind`), the rest of it true.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    style: str  # prose | bullets | table | code | links | mrkdwn | ...
    text: str
    kind: str | None = None  # INVENTED: the kind of the invented fact
    invented: str | None = None  # INVENTED: the invented value, as written


CORRECT: list[Answer] = [
    Answer(
        "prose",
        "Checkout is failing because payment-api is throwing. Every failing POST /checkout in "
        "the last ten minutes got a 503 from payment-api's POST /v1/charge with "
        "`NullPointerException in ChargeHandler.applyDiscount`, and checkout turns that into a "
        "502. The failing calls all land on pods of payment-api 1.42.0 (ReplicaSet "
        "payment-api-a9dfd1c984), which is the current revision 42 of the payment-api "
        "deployment in namespace shop, rolled out at 13:10 UTC. I'd roll back to revision 41 "
        "(1.41.3).",
    ),
    Answer(
        "mrkdwn",
        "*Checkout 502s: payment-api 1.42.0 is throwing*\n"
        "• `payment-api` POST /v1/charge returns 503 with _NullPointerException in "
        "ChargeHandler.applyDiscount_ on both pods of ReplicaSet `payment-api-a9dfd1c984` "
        "(`payment-api-a9dfd1c984-h4kzp`, `payment-api-a9dfd1c984-w9t2r`).\n"
        "• `checkout` 3.4.0 passes it on as a 502 (_upstream payment-api returned 503_).\n"
        "• First error 14:01:45 UTC, latest 14:09:15 UTC, 8 failing traces.\n"
        "• The current revision 42 (`registry/payment-api:1.42.0`) was rolled out at 13:10 UTC.\n"
        "*Suggested fix:* roll `deployment/payment-api` in namespace `shop` back to revision 41 "
        "(1.41.3).",
    ),
    Answer(
        "markdown",
        "## payment-api 1.42.0 regression\n\n"
        "**Impact:** `POST /checkout` fails with 502 since 14:01 UTC (8 traces so far, each "
        "about 1 s).\n\n"
        "**Cause:** payment-api revision 42 (image `registry/payment-api:1.42.0`, rolled out "
        "13:10 UTC) throws `NullPointerException` in `ChargeHandler.applyDiscount` on "
        "`/v1/charge`.\n\n"
        "**Evidence:**\n"
        "- [trace 428da8099f4efbacea67c7d1afcc4f14](https://grafana.example/explore?traceId="
        "428da8099f4efbacea67c7d1afcc4f14): the first failure, on pod "
        "`payment-api-a9dfd1c984-h4kzp`\n"
        "- a healthy request at 14:07:45 went through `payment-api-bd96317554-b8n6v` (1.41.3) "
        "in 139 ms\n\n"
        "**Next step:** `kubectl -n shop rollout undo deployment/payment-api --to-revision=41`",
    ),
    Answer(
        "table",
        "Here is what the traces show for the checkout incident:\n\n"
        "| service | version | pods | error |\n"
        "|---|---|---|---|\n"
        "| checkout | 3.4.0 | checkout-b5ebe37c4a-q7x2m, checkout-b5ebe37c4a-z5c8k | 502 |\n"
        "| payment-api | 1.42.0 | payment-api-a9dfd1c984-h4kzp, payment-api-a9dfd1c984-w9t2r "
        "| 503 NullPointerException |\n"
        "| postgres | - | postgres-0 | none |\n\n"
        "Postgres answers `SELECT payments` in under 10 ms, so the database is not involved. "
        "The errors run from 14:01 to 14:09 UTC and all come from payment-api 1.42.0.",
    ),
    Answer(
        "one-liner",
        "payment-api 1.42.0 (revision 42, deployed 13:10 UTC) throws a NullPointerException in "
        "ChargeHandler.applyDiscount; roll back to revision 41.",
    ),
    Answer(
        "one-liner",
        "orders-api is returning 503 because pgbouncer in front of postgres-0 is out of "
        "connections (max_client_conn 400).",
    ),
    Answer(
        "prose",
        "The orders-api 503s are a database problem, not a code problem. In trace "
        "6b3216fdaeeb975729fae923d5a4fd12 (14:09:30 UTC) orders-api 2.7.0 on pod "
        "orders-api-5de2206a53-c3j7d waited 2852 ms and failed with `database unavailable`, "
        "and the postgres span underneath it (`INSERT orders` on postgres-0) says "
        "`pgbouncer: no more connections allowed (max_client_conn 400); connection pool "
        "exhausted`. The current orders-api revision 7 (2.7.0) went out on 2026-11-28, two "
        "days before these errors, so a rollback to revision 6 is unlikely to help. Look at "
        "what is holding connections on pgbouncer, or raise max_client_conn.",
    ),
    Answer(
        "mrkdwn",
        "*orders-api: connection pool exhausted*\n"
        "• 9 `POST /orders` traces failed with 503 between 14:04:30 and 14:09:30 UTC, each "
        "taking 2.6 to 5.1 s\n"
        "• the database span fails with _pgbouncer: no more connections allowed "
        "(max_client_conn 400)_ on `postgres-0`\n"
        "• orders-api runs 2.7.0 (ReplicaSet `orders-api-5de2206a53`), unchanged since "
        "2026-11-28 14:10 UTC\n"
        "*Next:* check pgbouncer's pool and who holds the connections; no rollback needed.",
    ),
    Answer(
        "markdown",
        "### Two separate incidents in namespace `shop`\n\n"
        "1. **Checkout 502s**: payment-api 1.42.0 (current revision 42) fails "
        "`POST /v1/charge` with a NullPointerException; checkout 3.4.0 turns that into a 502. "
        "Started 14:01 UTC.\n"
        "2. **Orders 503s**: orders-api 2.7.0 cannot get a database connection: pgbouncer "
        "rejects it with `max_client_conn 400`. Started 14:04 UTC.\n\n"
        "They share `postgres-0`, but the payment-api calls to postgres succeed (4 to 8 ms), "
        "so they are not the same root cause.",
    ),
    Answer(
        "numbered",
        "What I checked:\n"
        "1. Searched `{ status = error }`: 17 error traces, 8 from checkout and 9 from "
        "orders-api, between 14:01:45 and 14:09:30 UTC.\n"
        "2. Opened 428da8099f4efbacea67c7d1afcc4f14: checkout pod checkout-b5ebe37c4a-q7x2m "
        "got a 503 from payment-api-a9dfd1c984-h4kzp (NullPointerException).\n"
        "3. Read the rollout history of deployment payment-api: the current revision is 42 "
        "(1.42.0), rolled out at 13:10 UTC; revision 41 ran 1.41.3.\n"
        "4. A healthy trace at 14:07:45 went through payment-api-bd96317554-b8n6v on 1.41.3.\n\n"
        "Conclusion: 1.42.0 is broken; rolling back to revision 41 should stop the 502s.",
    ),
    Answer(
        "links",
        "Root cause: payment-api 1.42.0. See <https://grafana.example/explore?x=1|Grafana> for "
        "the error traces; the first is <https://grafana.example/explore?traceId="
        "428da8099f4efbacea67c7d1afcc4f14|428da8099f4efbacea67c7d1afcc4f14> at 14:01:45 UTC "
        "and the latest <https://grafana.example/explore?traceId="
        "000000000000000030877432d1026706|000000000000000030877432d1026706> at 14:09:15 UTC. "
        "Both fail in pod payment-api-a9dfd1c984-h4kzp with a NullPointerException. The "
        "previous revision 41 (registry/payment-api:1.41.3) did not have the bug.",
    ),
    Answer(
        "links",
        "orders-api is failing on the database: [trace 6b3216fdaeeb975729fae923d5a4fd12]"
        "(https://grafana.example/explore?traceId=6b3216fdaeeb975729fae923d5a4fd12) shows "
        "`INSERT orders` on postgres-0 rejected by pgbouncer (max_client_conn 400). See the "
        "[orders-api dashboard](https://grafana.example/d/orders-api?var-namespace=shop) for "
        "the 503 rate. The failing pod in that trace is orders-api-5de2206a53-c3j7d.",
    ),
    Answer(
        "code",
        "The failing span, from trace `c8fe21da80270815fe85df2fbdaa35ad`:\n"
        "```\n"
        "payment-api POST /v1/charge 1092 ms http=503\n"
        "status: NullPointerException in ChargeHandler.applyDiscount (payment-api:1.42.0)\n"
        "k8s.pod.name=payment-api-a9dfd1c984-w9t2r\n"
        "```\n"
        "It started at 14:02:30 UTC. To roll back:\n"
        "```\n"
        "kubectl -n shop rollout undo deployment/payment-api --to-revision=41\n"
        "```",
    ),
    Answer(
        "long",
        "Summary: checkout has been returning 502 on `POST /checkout` since 14:01 UTC because "
        "its upstream payment-api fails every charge with a 503.\n\n"
        "What the traces say: I looked at all 8 checkout error traces from 14:01:45 to "
        "14:09:15 UTC. Each one has the same two error spans: checkout (3.4.0, pods "
        "checkout-b5ebe37c4a-q7x2m and checkout-b5ebe37c4a-z5c8k) reports `upstream "
        "payment-api returned 503`, and payment-api reports `NullPointerException in "
        "ChargeHandler.applyDiscount (payment-api:1.42.0)`. The payment-api side runs on "
        "payment-api-a9dfd1c984-h4kzp and payment-api-a9dfd1c984-w9t2r, both in ReplicaSet "
        "payment-api-a9dfd1c984. The postgres span in the same traces is fine.\n\n"
        "What changed: the payment-api deployment's current revision 42 (image "
        "registry/payment-api:1.42.0) was rolled out at 13:10 UTC. Revision 41 ran 1.41.3 and "
        "was rolled out at 12:10 UTC. One pod of it, payment-api-bd96317554-b8n6v, is still "
        "serving, and a request through it at 14:07:45 succeeded in 139 ms.\n\n"
        "Recommendation: roll payment-api back to revision 41. Checkout itself (revision 18, "
        "3.4.0) needs no change.",
    ),
    Answer(
        "mrkdwn",
        "_Short version:_ the bad release is *payment-api 1.42.0*. Roll back to the previous "
        "revision 41 (`registry/payment-api:1.41.3`), the one still healthy on "
        "`payment-api-bd96317554-b8n6v`.",
    ),
    Answer(
        "attributes",
        "The error spans carry `service.version=1.42.0`, `k8s.replicaset.name="
        "payment-api-a9dfd1c984` and `k8s.pod.name=payment-api-a9dfd1c984-w9t2r` (trace "
        "db2a0df3dbe4d58fed8a728e7eca0fa5, 14:04:00 UTC), all in `k8s.namespace.name=shop`. "
        "The one healthy payment-api span has `service.version=1.41.3`.",
    ),
    Answer(
        "table",
        "Rollout history of `payment-api` (namespace shop):\n\n"
        "| revision | image | created |\n"
        "|---|---|---|\n"
        "| 40 | registry/payment-api:1.40.2 | 11:10 UTC |\n"
        "| 41 | registry/payment-api:1.41.3 | 12:10 UTC |\n"
        "| 42 (current) | registry/payment-api:1.42.0 | 13:10 UTC |\n\n"
        "The errors began 51 minutes after revision 42, at 14:01 UTC.",
    ),
    Answer(
        "table",
        "| | checkout | payment-api | orders-api |\n"
        "|---|---|---|---|\n"
        "| current revision | 18 | 42 | 7 |\n"
        "| version | 3.4.0 | 1.42.0 | 2.7.0 |\n"
        "| ReplicaSet | checkout-b5ebe37c4a | payment-api-a9dfd1c984 | orders-api-5de2206a53 |\n"
        "| erroring | yes, 502 | yes, 503 | yes, 503 |\n\n"
        "Only payment-api changed today (13:10 UTC); checkout and orders-api were last "
        "deployed on 2026-11-29 and 2026-11-28.",
    ),
    Answer(
        "prose",
        "It's the payment-api deploy. Revision 42 went out at 13:10 UTC with image "
        "registry/payment-api:1.42.0, and from 14:01 UTC every charge on its pods fails with a "
        "NullPointerException. Checkout only relays the failure.",
    ),
    Answer(
        "bullets",
        "Checkout incident, key facts:\n"
        "- failing service: payment-api 1.42.0\n"
        "- pods: payment-api-a9dfd1c984-h4kzp, payment-api-a9dfd1c984-w9t2r\n"
        "- error: NullPointerException in ChargeHandler.applyDiscount\n"
        "- first failure: 14:01:45 UTC (trace 428da8099f4efbacea67c7d1afcc4f14)\n"
        "- current revision 42, previous revision 41\n"
        "- namespace: shop",
    ),
    Answer(
        "mrkdwn",
        "*Is it the database?* Not for checkout. In every checkout trace the `postgres` span "
        "(`SELECT payments` on `postgres-0`) succeeds in 4 to 8 ms; the failure is in "
        "payment-api 1.42.0 itself. For *orders-api* it is the database: pgbouncer in front "
        "of `postgres-0` refuses new connections (_max_client_conn 400_).",
    ),
    Answer(
        "prose",
        "No, orders-api has not been deployed recently. Its current revision 7 (2.7.0, "
        "ReplicaSet orders-api-5de2206a53) was created on 2026-11-28 at 14:10 UTC, and the "
        "previous revision 6 ran 2.6.0. The 503s started at 14:04:30 UTC today, so the "
        "release is not the trigger.",
    ),
    Answer(
        "numbered",
        "Rollback plan for payment-api:\n"
        "1. `kubectl -n shop rollout undo deployment/payment-api --to-revision=41`\n"
        "2. Watch the new pods of ReplicaSet payment-api-bd96317554 become ready.\n"
        "3. Confirm the 502s on checkout stop; the last one was at 14:09:15 UTC.\n"
        "4. Keep 1.42.0 off until ChargeHandler.applyDiscount is fixed.",
    ),
    Answer(
        "short",
        "Yes: go back to revision 41 of payment-api (1.41.3). Revision 42 is the broken one.",
    ),
    Answer(
        "markdown",
        "**orders-api 503s: the database connection pool is exhausted**\n\n"
        "- error: `database unavailable` on orders-api 2.7.0\n"
        "- root: `pgbouncer: no more connections allowed (max_client_conn 400)`\n"
        "- where: pod `postgres-0`, namespace `shop`\n"
        "- when: 14:04:30 to 14:09:30 UTC, 9 traces\n"
        "- example: [6b3216fdaeeb975729fae923d5a4fd12](https://grafana.example/explore?"
        "traceId=6b3216fdaeeb975729fae923d5a4fd12)",
    ),
    Answer(
        "prose",
        "The deployment payment-api in namespace shop is at revision 42, running "
        "registry/payment-api:1.42.0 since 13:10 UTC. Before that, revision 41 ran "
        "registry/payment-api:1.41.3 from 12:10 UTC and revision 40 ran "
        "registry/payment-api:1.40.2 from 11:10 UTC.",
    ),
    Answer(
        "mrkdwn",
        "Checkout pods `checkout-b5ebe37c4a-q7x2m` and `checkout-b5ebe37c4a-z5c8k` both return "
        "502, always right after payment-api answers 503, so *checkout is a victim, not the "
        "cause*. Its current revision 18 (3.4.0) is from 2026-11-29.",
    ),
    Answer(
        "prose",
        "Only the 1.42.0 pods fail. Both pods of ReplicaSet payment-api-a9dfd1c984 show the "
        "NullPointerException, while the leftover 1.41.3 pod payment-api-bd96317554-b8n6v "
        "served a charge at 14:07:45 UTC without error. That points squarely at the code in "
        "1.42.0.",
    ),
    Answer(
        "one-liner",
        "Latest failure: trace 000000000000000030877432d1026706 at 14:09:15 UTC, checkout 502 "
        "← payment-api 503 on payment-api-a9dfd1c984-h4kzp.",
    ),
    Answer(
        "numbered",
        "Timeline (UTC, 2026-11-30):\n"
        "1. 11:10 payment-api revision 40 (1.40.2) rolled out\n"
        "2. 12:10 revision 41 (1.41.3) rolled out\n"
        "3. 13:10 revision 42 (1.42.0) rolled out\n"
        "4. 14:01 first checkout 502 (payment-api NullPointerException)\n"
        "5. 14:04 first orders-api 503 (pgbouncer out of connections)\n"
        "6. 14:09 both still failing",
    ),
    Answer(
        "code",
        "Run this to see the pool state on the database pod:\n"
        "```\n"
        "kubectl -n shop exec postgres-0 -- psql -c 'SHOW POOLS' -p 6432 pgbouncer\n"
        "```\n"
        "The orders-api errors (`max_client_conn 400` reached) started at 14:04:30 UTC, on "
        "`orders-api-5de2206a53-c3j7d` among others.",
    ),
    Answer(
        "prose",
        "Two incidents, both in shop. Checkout 502s come from payment-api 1.42.0, which throws "
        "a NullPointerException since 14:01 UTC; the fix is to roll payment-api back to "
        "revision 41. The orders-api 503s come from pgbouncer refusing connections to "
        "postgres-0 since 14:04 UTC; orders-api 2.7.0 itself has not changed since "
        "2026-11-28.",
    ),
    Answer(
        "mrkdwn",
        "*Who is affected*\n"
        "• customers checking out: `POST /checkout` → 502 (checkout 3.4.0)\n"
        "• customers placing orders: `POST /orders` → 503 (orders-api 2.7.0)\n"
        "*Since*\n"
        "• 14:01 UTC for checkout, 14:04 UTC for orders\n"
        "*Why*\n"
        "• payment-api 1.42.0 NullPointerException / pgbouncer pool exhausted",
    ),
    Answer(
        "markdown",
        "The image that breaks is `registry/payment-api:1.42.0`. The error message even names "
        "it: `NullPointerException in ChargeHandler.applyDiscount (payment-api:1.42.0)`. The "
        "previous image `registry/payment-api:1.41.3` is still running on one pod and works.",
    ),
    Answer(
        "prose",
        "Latency is a symptom, not the cause, on checkout: the failing checkout requests take "
        "about a second (957 to 1234 ms) because payment-api spends that long before it "
        "throws. Healthy checkouts, like trace bee3772a077021721a278f64f7fd633d at 14:07:45, "
        "take 139 ms end to end.",
    ),
    Answer(
        "table",
        "| trace | started (UTC) | pod |\n"
        "|---|---|---|\n"
        "| 428da8099f4efbacea67c7d1afcc4f14 | 14:01:45 | payment-api-a9dfd1c984-h4kzp |\n"
        "| c8fe21da80270815fe85df2fbdaa35ad | 14:02:30 | payment-api-a9dfd1c984-w9t2r |\n"
        "| db2a0df3dbe4d58fed8a728e7eca0fa5 | 14:04:00 | payment-api-a9dfd1c984-w9t2r |\n"
        "| 1a11f5125227c3712da86a78c49ea20e | 14:07:00 | payment-api-a9dfd1c984-h4kzp |\n\n"
        "All four fail with the same NullPointerException.",
    ),
    Answer(
        "prose",
        "I would not roll back orders-api. Its last rollout, revision 7 with "
        "registry/orders-api:2.7.0, was on 2026-11-28 14:10 UTC and ran fine for two days; the "
        "errors are pgbouncer rejecting connections (max_client_conn 400), which a rollback "
        "to revision 6 would not change.",
    ),
    Answer(
        "mrkdwn",
        "Rollback target for `deployment/payment-api`: *revision 41* → "
        "`registry/payment-api:1.41.3` (ReplicaSet `payment-api-bd96317554`). Current is "
        "*revision 42* → `registry/payment-api:1.42.0`.",
    ),
    Answer(
        "long",
        "Here's where things stand at 14:10 UTC.\n\n"
        "Checkout: broken by payment-api. The payment-api deployment moved to revision 42 "
        "(1.42.0) at 13:10 UTC, and since 14:01 UTC its `POST /v1/charge` fails with "
        "`NullPointerException in ChargeHandler.applyDiscount`. Checkout 3.4.0 maps those 503s "
        "to 502s for the user. I saw it on both 1.42.0 pods, payment-api-a9dfd1c984-h4kzp and "
        "payment-api-a9dfd1c984-w9t2r.\n\n"
        "Orders: a separate problem. orders-api 2.7.0 on orders-api-5de2206a53-c3j7d gets "
        "`database unavailable`, and the postgres-0 span underneath explains it: pgbouncer has "
        "hit max_client_conn 400. Nothing was deployed to orders-api today; its revision 7 "
        "is from 2026-11-28.\n\n"
        "Suggested actions: roll payment-api back to revision 41, and have someone look at "
        "pgbouncer's connection limits.",
    ),
    Answer(
        "one-liner",
        "The broken ReplicaSet is payment-api-a9dfd1c984 (1.42.0); payment-api-bd96317554 "
        "(1.41.3) is the good one.",
    ),
    Answer(
        "markdown",
        "#### Checkout errors by pod\n"
        "- `checkout-b5ebe37c4a-q7x2m`: 4 failing traces (14:01:45, 14:07:00, 14:08:30, "
        "14:09:15 UTC)\n"
        "- `checkout-b5ebe37c4a-z5c8k`: 4 failing traces (14:02:30, 14:04:00, 14:04:45, "
        "14:06:15 UTC)\n\n"
        "Both pods belong to ReplicaSet `checkout-b5ebe37c4a` (checkout 3.4.0) and fail only "
        "because payment-api does.",
    ),
    Answer(
        "prose",
        "Yes, the deploy lines up. payment-api 1.42.0 was rolled out at 13:10 UTC, and the "
        "first charge error showed up at 14:01 UTC. The "
        "one pod still on 1.41.3 does not fail.",
    ),
    Answer(
        "mrkdwn",
        "> Is checkout 3.4.0 the problem?\n"
        "No. checkout 3.4.0 has been the current revision 18 since 2026-11-29 14:10 UTC, a "
        "day before any error. The 502s it returns wrap payment-api's 503s, which come from "
        "payment-api 1.42.0 (rolled out today at 13:10 UTC).",
    ),
    Answer(
        "numbered",
        "Orders triage:\n"
        "1. orders-api pod `orders-api-5de2206a53-c3j7d` returns 503 `database unavailable`.\n"
        "2. The database span on `postgres-0` shows pgbouncer at max_client_conn 400.\n"
        "3. Errors from 14:04:30 UTC onwards, 9 traces; the slowest took 5081 ms.\n"
        "4. orders-api's current revision 7 (2.7.0) is two days old; revision 6 ran 2.6.0.",
    ),
    Answer(
        "prose",
        "For the Berlin folks: the checkout errors began at 15:01 CET (14:01 UTC), about 50 "
        "minutes after payment-api v1.42.0 went live at 14:10 CET.",
    ),
    Answer(
        "mrkdwn",
        "`deployment shop/payment-api`: *rev 42* is current (v1.42.0, created "
        "2026-11-30T13:10:00Z); *rev 41* is v1.41.3 (created 2026-11-30T12:10:00Z).",
    ),
    Answer(
        "one-liner",
        "The pods serving the broken version are payment-api-a9dfd1c984-h4kzp and "
        "payment-api-a9dfd1c984-w9t2r.",
    ),
    Answer(
        "prose",
        "The 503 in trace 6b3216fdaeeb975729fae923d5a4fd12 came from ReplicaSet "
        "orders-api-5de2206a53, which is orders-api revision 7; the previous ReplicaSet, "
        "orders-api-e136ae80a1, ran 2.6.0.",
    ),
    Answer(
        "markdown",
        "checkout's previous revision 17 ran `registry/checkout:3.3.2` (ReplicaSet "
        "`checkout-a1892edc46`); the current revision 18 runs 3.4.0 and was deployed "
        "2026-11-29 14:10 UTC. Rolling checkout back would not help: its 502s come from "
        "payment-api.",
    ),
    Answer(
        "table",
        "orders-api rollout history (namespace shop):\n\n"
        "| revision | image | ReplicaSet | created |\n"
        "|---|---|---|---|\n"
        "| 6 | registry/orders-api:2.6.0 | orders-api-e136ae80a1 | 2026-11-26 14:10 UTC |\n"
        "| 7 (current) | registry/orders-api:2.7.0 | orders-api-5de2206a53 | "
        "2026-11-28 14:10 UTC |",
    ),
    Answer(
        "mrkdwn",
        "orders-api has been throwing 503s since 14:04 UTC; it's pool exhaustion on "
        "`postgres-0`, not the 2.7.0 release (deployed 2026-11-28).",
    ),
]

INVENTED: list[Answer] = [
    # --- pod ---
    Answer(
        "prose",
        "payment-api 1.42.0 is failing every charge with a NullPointerException. The first "
        "failure, at 14:01:45 UTC, was on pod payment-api-a9dfd1c984-h4kzq, and checkout "
        "turned it into a 502.",
        kind="pod",
        invented="payment-api-a9dfd1c984-h4kzq",
    ),
    Answer(
        "mrkdwn",
        "*orders-api 503s*\n"
        "• pod `orders-api-5de2206a53-c3j7b` fails with _database unavailable_\n"
        "• pgbouncer on `postgres-0` is at max_client_conn 400\n"
        "• started 14:04:30 UTC",
        kind="pod",
        invented="orders-api-5de2206a53-c3j7b",
    ),
    Answer(
        "table",
        "| checkout pod | failing traces |\n"
        "|---|---|\n"
        "| checkout-b5ebe37c4a-q7x2m | 4 |\n"
        "| checkout-b5ebe37c4a-z5c8x | 4 |\n\n"
        "Both return 502 because payment-api 1.42.0 returns 503.",
        kind="pod",
        invented="checkout-b5ebe37c4a-z5c8x",
    ),
    Answer(
        "markdown",
        "**orders-api** cannot reach the database: the `INSERT orders` span on pod "
        "`postgres-1` fails with `pgbouncer: no more connections allowed (max_client_conn "
        "400)`. orders-api 2.7.0 then returns 503.",
        kind="pod",
        invented="postgres-1",
    ),
    Answer(
        "prose",
        "The one healthy payment-api request I found, at 14:07:45 UTC, went through "
        "payment-api-bd96317554-b8n6w, which still runs 1.41.3. So the previous version works.",
        kind="pod",
        invented="payment-api-bd96317554-b8n6w",
    ),
    # --- replicaset ---
    Answer(
        "prose",
        "All the failing charges come from ReplicaSet payment-api-a9dfd1c948, the pods of "
        "payment-api 1.42.0 (current revision 42, rolled out at 13:10 UTC).",
        kind="replicaset",
        invented="payment-api-a9dfd1c948",
    ),
    Answer(
        "mrkdwn",
        "orders-api runs 2.7.0 from ReplicaSet `orders-api-5de2206a35`; its 503s come from "
        "pgbouncer refusing connections on `postgres-0`.",
        kind="replicaset",
        invented="orders-api-5de2206a35",
    ),
    Answer(
        "bullets",
        "Checkout side:\n"
        "- ReplicaSet: checkout-b5ebe37c4e (3.4.0)\n"
        "- pods: checkout-b5ebe37c4a-q7x2m, checkout-b5ebe37c4a-z5c8k\n"
        "- error: 502, upstream payment-api returned 503",
        kind="replicaset",
        invented="checkout-b5ebe37c4e",
    ),
    Answer(
        "markdown",
        "Rolling back to revision 41 brings back ReplicaSet `payment-api-bd96317545` "
        "(`registry/payment-api:1.41.3`), whose pod served a healthy charge at 14:07:45 UTC.",
        kind="replicaset",
        invented="payment-api-bd96317545",
    ),
    Answer(
        "prose",
        "orders-api's previous revision 6 (2.6.0) is ReplicaSet orders-api-7f9c4d8b6; the "
        "current revision 7 (2.7.0) has been running since 2026-11-28.",
        kind="replicaset",
        invented="orders-api-7f9c4d8b6",
    ),
    # --- deployment ---
    Answer(
        "code",
        "payment-api 1.42.0 is the bad release. Roll it back with:\n"
        "```\n"
        "kubectl -n shop rollout undo deployment/payment-gateway --to-revision=41\n"
        "```",
        kind="deployment",
        invented="payment-gateway",
    ),
    Answer(
        "prose",
        "The payments-api deployment in namespace shop moved to revision 42 at 13:10 UTC, and "
        "its pods have failed with a NullPointerException since 14:01 UTC.",
        kind="deployment",
        invented="payments-api",
    ),
    Answer(
        "mrkdwn",
        "*Checkout is not the cause.* deployment checkout-web is on 3.4.0 and only relays the "
        "503s of payment-api 1.42.0 as 502s.",
        kind="deployment",
        invented="checkout-web",
    ),
    Answer(
        "numbered",
        "For the orders incident:\n"
        "1. orders-api 2.7.0 gets `database unavailable` since 14:04:30 UTC.\n"
        "2. The database span on postgres-0 says no more connections allowed "
        "(max_client_conn 400).\n"
        "3. Scale `deployment/pgbouncer` in namespace shop up or raise its max_client_conn.",
        kind="deployment",
        invented="pgbouncer",
    ),
    Answer(
        "markdown",
        "- **deployment orders-service**: 2.7.0, revision 7, unchanged since 2026-11-28\n"
        "- **errors**: 503 `database unavailable` from 14:04:30 UTC\n"
        "- **cause**: pgbouncer connection pool exhausted on `postgres-0`",
        kind="deployment",
        invented="orders-service",
    ),
    # --- service ---
    Answer(
        "prose",
        "Checkout's 502s start in service payment-gateway: every `POST /v1/charge` fails with "
        "a NullPointerException in ChargeHandler.applyDiscount since 14:01 UTC.",
        kind="service",
        invented="payment-gateway",
    ),
    Answer(
        "mrkdwn",
        "orders-api returns 503 because the orders-db service refuses connections: "
        "_pgbouncer: no more connections allowed (max_client_conn 400)_. First error at "
        "14:04:30 UTC.",
        kind="service",
        invented="orders-db",
    ),
    Answer(
        "markdown",
        "The NullPointerException is thrown in `ChargeHandler.applyDiscount`, which calls "
        "`discount-service` before charging. payment-api 1.42.0 introduced it; roll back to "
        "revision 41.",
        kind="service",
        invented="discount-service",
    ),
    Answer(
        "code",
        "The failing spans carry `service.name=pricing-api` and `service.version=1.42.0`, "
        "on pod payment-api-a9dfd1c984-w9t2r since 14:02:30 UTC.",
        kind="service",
        invented="pricing-api",
    ),
    Answer(
        "prose",
        "The checkout-frontend service is what users see fail: it returns 502 on "
        "POST /checkout whenever payment-api 1.42.0 answers 503, from 14:01 UTC on.",
        kind="service",
        invented="checkout-frontend",
    ),
    # --- namespace ---
    Answer(
        "prose",
        "payment-api in namespace payments is at revision 42 (1.42.0), rolled out at 13:10 "
        "UTC; roll it back to revision 41.",
        kind="namespace",
        invented="payments",
    ),
    Answer(
        "mrkdwn",
        "Everything failing is in the `shop-prod` namespace: checkout 3.4.0, payment-api "
        "1.42.0 and orders-api 2.7.0.",
        kind="namespace",
        invented="shop-prod",
    ),
    Answer(
        "bullets",
        "Where:\n"
        "- namespace: production\n"
        "- deployment: payment-api (revision 42, 1.42.0)\n"
        "- pods: payment-api-a9dfd1c984-h4kzp, payment-api-a9dfd1c984-w9t2r",
        kind="namespace",
        invented="production",
    ),
    Answer(
        "code",
        "The error spans carry `k8s.namespace.name=ecommerce` and "
        "`k8s.pod.name=payment-api-a9dfd1c984-h4kzp`, with `service.version=1.42.0`.",
        kind="namespace",
        invented="ecommerce",
    ),
    Answer(
        "prose",
        "orders-api runs in namespace default with 2.7.0 (revision 7); its 503s come from "
        "pgbouncer on postgres-0 being out of connections.",
        kind="namespace",
        invented="default",
    ),
    # --- node ---
    Answer(
        "prose",
        "Both failing payment-api pods, payment-api-a9dfd1c984-h4kzp and "
        "payment-api-a9dfd1c984-w9t2r, run on node gke-prod-pool-2-x7k9, but the error is a "
        "NullPointerException in 1.42.0, not a node problem.",
        kind="node",
        invented="gke-prod-pool-2-x7k9",
    ),
    Answer(
        "mrkdwn",
        "`postgres-0` sits on node ip-10-0-3-17.ec2.internal; pgbouncer there refuses "
        "connections at max_client_conn 400, so orders-api returns 503.",
        kind="node",
        invented="ip-10-0-3-17.ec2.internal",
    ),
    Answer(
        "attributes",
        "The failing span has `k8s.pod.name=orders-api-5de2206a53-c3j7d` and "
        "`k8s.node.name=gke-prod-pool-1-ab12`, at 14:09:30 UTC, with `database unavailable`.",
        kind="node",
        invented="gke-prod-pool-1-ab12",
    ),
    Answer(
        "markdown",
        "- checkout pods: `checkout-b5ebe37c4a-q7x2m`, `checkout-b5ebe37c4a-z5c8k`\n"
        "- both scheduled on the gke-prod-default-pool-3f2a node\n"
        "- both return 502 when payment-api 1.42.0 fails",
        kind="node",
        invented="gke-prod-default-pool-3f2a",
    ),
    Answer(
        "code",
        "To rule out the host, check `kubectl describe node/aks-nodepool1-12345678-vmss000002`, "
        "where payment-api-a9dfd1c984-h4kzp runs. The errors themselves are a "
        "NullPointerException in payment-api 1.42.0.",
        kind="node",
        invented="aks-nodepool1-12345678-vmss000002",
    ),
    # --- image ---
    Answer(
        "prose",
        "The current payment-api image is registry/payment-api:1.42.1, deployed as revision "
        "42; its pods throw a NullPointerException since 14:01 UTC.",
        kind="image",
        invented="registry/payment-api:1.42.1",
    ),
    Answer(
        "mrkdwn",
        "orders-api runs `registry/orders-api:2.7.1` (revision 7); the 503s come from "
        "pgbouncer on `postgres-0` (max_client_conn 400).",
        kind="image",
        invented="registry/orders-api:2.7.1",
    ),
    Answer(
        "markdown",
        "**Rollback:** set `deployment/payment-api` back to `registry/payment-api:latest`, "
        "which was fine before revision 42.",
        kind="image",
        invented="registry/payment-api:latest",
    ),
    Answer(
        "table",
        "| deployment | image | revision |\n"
        "|---|---|---|\n"
        "| checkout | registry/checkout:3.4.1 | 18 |\n"
        "| payment-api | registry/payment-api:1.42.0 | 42 |",
        kind="image",
        invented="registry/checkout:3.4.1",
    ),
    Answer(
        "prose",
        "Roll payment-api back to revision 41; that is image payment-api:1.41.2, which the one "
        "healthy pod payment-api-bd96317554-b8n6v still runs.",
        kind="image",
        invented="payment-api:1.41.2",
    ),
    Answer(
        "code",
        "The broken image is `gcr.io/shop/payment-api:1.42.0`, the current revision 42.",
        kind="image",
        invented="gcr.io/shop/payment-api:1.42.0",
    ),
    # --- version ---
    Answer(
        "prose",
        "payment-api 1.42.1 throws a NullPointerException in ChargeHandler.applyDiscount on "
        "every charge since 14:01 UTC; roll back to revision 41.",
        kind="version",
        invented="1.42.1",
    ),
    Answer(
        "mrkdwn",
        "checkout runs 2.7.0 and is only relaying payment-api's 503s as 502s; the bug is in "
        "payment-api 1.42.0.",
        kind="version",
        invented="2.7.0",
    ),
    Answer(
        "prose",
        "orders-api 2.8.0 returns 503 `database unavailable` because pgbouncer on postgres-0 "
        "is out of connections.",
        kind="version",
        invented="2.8.0",
    ),
    Answer(
        "bullets",
        "- payment-api is currently running 1.41.3 (revision 42)\n"
        "- errors: NullPointerException since 14:01 UTC\n"
        "- pods: payment-api-a9dfd1c984-h4kzp, payment-api-a9dfd1c984-w9t2r",
        kind="version",
        invented="1.41.3",
    ),
    Answer(
        "prose",
        "Roll payment-api back to 1.41.2 (revision 41); 1.42.0 is the broken release.",
        kind="version",
        invented="1.41.2",
    ),
    Answer(
        "markdown",
        "Checkout is fine: checkout v3.5 is the current revision 18 and it only passes on the "
        "payment-api 503s.",
        kind="version",
        invented="v3.5",
    ),
    # --- revision ---
    Answer(
        "prose",
        "payment-api's current revision 41 is the one throwing the NullPointerException; it "
        "runs 1.42.0 on payment-api-a9dfd1c984-h4kzp and payment-api-a9dfd1c984-w9t2r.",
        kind="revision",
        invented="41",
    ),
    Answer(
        "mrkdwn",
        "payment-api moved to *revision 43* at 13:10 UTC (1.42.0), and that is what breaks "
        "checkout.",
        kind="revision",
        invented="43",
    ),
    Answer(
        "prose",
        "orders-api is on revision 8 (2.7.0), unchanged for two days; the 503s are pgbouncer "
        "running out of connections on postgres-0.",
        kind="revision",
        invented="8",
    ),
    Answer(
        "markdown",
        "**checkout** is on revision 19 with 3.4.0; it returns 502 only because payment-api "
        "returns 503.",
        kind="revision",
        invented="19",
    ),
    Answer(
        "code",
        "Roll back to revision 39, the last good one:\n"
        "```\n"
        "kubectl -n shop rollout undo deployment/payment-api\n"
        "```\n"
        "Revision 42 (1.42.0) is the broken one.",
        kind="revision",
        invented="39",
    ),
    Answer(
        "one-liner",
        "Roll checkout back to revision 18: its upstream payment-api fails with 503 since "
        "14:01 UTC.",
        kind="revision",
        invented="18",
    ),
    # --- time ---
    Answer(
        "prose",
        "payment-api revision 42 (1.42.0) rolled out at 12:40 UTC; since then its pods throw "
        "a NullPointerException on every charge.",
        kind="time",
        invented="12:40",
    ),
    Answer(
        "mrkdwn",
        "Checkout errors started at 09:30 UTC: `POST /checkout` returns 502 because "
        "payment-api 1.42.0 returns 503.",
        kind="time",
        invented="09:30 UTC",
    ),
    Answer(
        "prose",
        "The first orders-api 503 came at 13:45 UTC, when pgbouncer on postgres-0 hit "
        "max_client_conn 400.",
        kind="time",
        invented="13:45 UTC",
    ),
    Answer(
        "bullets",
        "Rollout history of payment-api:\n"
        "- revision 41 (1.41.3): 12:10 UTC\n"
        "- revision 42 (1.42.0): 2026-11-30 13:45 UTC",
        kind="time",
        invented="2026-11-30 13:45",
    ),
    Answer(
        "prose",
        "payment-api 1.42.0 was deployed at 13:40 UTC, and the checkout 502s followed.",
        kind="time",
        invented="13:40",
    ),
    Answer(
        "prose",
        "orders-api's current revision 7 (2.7.0) was rolled out at 2026-11-30 12:10 UTC.",
        kind="time",
        invented="2026-11-30 12:10",
    ),
    # --- links ---
    Answer(
        "links",
        "[First failing trace](https://grafana.example/explore?traceId="
        "428da8099f4efbacea67c7d1afcc4f14): checkout 502 at 14:01:45 UTC. payment-api 1.42.0 "
        "(revision 42) was rolled out at 11:55 UTC, see the "
        "<https://grafana.example/d/deploys|deploy dashboard>.",
        kind="time",
        invented="11:55 UTC",
    ),
    Answer(
        "links",
        "<https://grafana.example/explore?x=1|Grafana> shows the 503s of orders-api 2.7.0 in "
        "namespace prod-shop from 14:04:30 UTC: pgbouncer has no connections left "
        "(max_client_conn 400).",
        kind="namespace",
        invented="prod-shop",
    ),
    Answer(
        "links",
        "payment-api 1.42.3 is the release that broke `POST /v1/charge` ([first failing "
        "trace](https://grafana.example/explore?traceId=428da8099f4efbacea67c7d1afcc4f14)): "
        "a NullPointerException in ChargeHandler.applyDiscount since 14:01 UTC.",
        kind="version",
        invented="1.42.3",
    ),
]
