"""A second pair of corpora, written by a reviewer who had not read the first
(bench/grounding_corpus.py), in the phrasing a model uses: "the 1.42.0 rollout", "pods
h4kzp and w9t2r", "Current revision: 42", "2:15 PM UTC". The checker was corrected after
their first run (55/57 correct answers clean, 46/51 invented facts caught); the benchmark
reports them apart from the first pair."""

from bench.grounding_corpus import Answer

CORRECT: list[Answer] = [
    Answer(
        "held-out",
        "**Summary:** Checkout is failing because `payment-api` started "
        "throwing `NullPointerException` in `ChargeHandler.applyDiscount` right "
        "after the 1.42.0 rollout.\n\n**Details:**\n- Errors began at ~14:01 "
        "UTC and are still ongoing (latest at 14:09).\n- Both erroring pods, "
        "h4kzp and w9t2r, belong to ReplicaSet `payment-api-a9dfd1c984`.\n- "
        "Revision 42 (image `registry/payment-api:1.42.0`) was created at 13:10 "
        "UTC.\n\n**Recommendation:** Roll back to revision 41 (1.41.3).",
    ),
    Answer(
        "held-out",
        "The 1.42.0 rollout of payment-api is the most likely cause. Since it "
        "went out at 13:10 UTC, every `POST /v1/charge` in the error traces "
        "returns 503 with a NullPointerException.",
    ),
    Answer(
        "held-out",
        "## What happened\npayment-api was upgraded from 1.41.3 to 1.42.0 "
        "(revision 41 → 42). The new build throws `NullPointerException in "
        "ChargeHandler.applyDiscount`, so checkout gets 503s and returns 502 to "
        "users.\n\n## Impact\n- Service: checkout (`POST /checkout`)\n- "
        "Namespace: shop\n- First error: 14:01:45 UTC\n- Last seen: 14:09:15 "
        "UTC",
    ),
    Answer(
        "held-out",
        "Namespace: `shop`\nDeployment: `payment-api`\nCurrent revision: "
        "42\nPrevious revision: 41\n**Version:** 1.42.0 (was 1.41.3)",
    ),
    Answer(
        "held-out",
        "Rolling back payment-api from revision 42 to 41 would bring back "
        "1.41.3 — the one healthy trace still ran on pod "
        "`payment-api-bd96317554-b8n6v` with that version.",
    ),
    Answer(
        "held-out",
        "The orders-api errors are a separate issue: postgres-0 is rejecting "
        "connections (`pgbouncer: no more connections allowed (max_client_conn "
        '400)`), so `POST /orders` fails with 503 "database unavailable". This '
        "has nothing to do with a deploy: orders-api 2.7.0 has been running "
        "since 2026-11-28.",
    ),
    Answer(
        "held-out",
        "> NullPointerException in ChargeHandler.applyDiscount "
        "(payment-api:1.42.0)\n\nThat status message shows up on every failing "
        "charge from 14:01 to 14:09 UTC.",
    ),
    Answer(
        "held-out",
        "Two incidents overlap:\n1. **checkout → payment-api** (bad deploy): "
        "payment-api `1.42.0`, revision 42, pods `payment-api-a9dfd1c984-h4kzp` "
        "and `payment-api-a9dfd1c984-w9t2r`.\n2. **orders-api → postgres** "
        "(connection pool exhausted): pod `orders-api-5de2206a53-c3j7d`, "
        "`postgres-0`.",
    ),
    Answer(
        "held-out",
        "The checkout deployment itself looks fine — it's on 3.4.0 (revision "
        "18, rolled out 2026-11-29 14:10 UTC) and only fails because its "
        "upstream returns 503.",
    ),
    Answer(
        "held-out",
        "Error window: 14:01:45–14:09:32 UTC (about 8 minutes).",
    ),
    Answer(
        "held-out",
        "I'd roll `payment-api` back to revision 41. That ReplicaSet "
        "(`payment-api-bd96317554`) ran `registry/payment-api:1.41.3` without "
        "errors.",
    ),
    Answer(
        "held-out",
        "payment-api went from 1.41.3 → 1.42.0 at 13:10 UTC today, about an "
        "hour before the first failures.",
    ),
    Answer(
        "held-out",
        "Root cause (likely): a regression in payment-api 1.42.0. Evidence: 8 "
        "of 8 checkout error traces end in payment-api 503s with "
        '"NullPointerException in ChargeHandler.applyDiscount '
        '(payment-api:1.42.0)".',
    ),
    Answer(
        "held-out",
        "The checkout pods (`checkout-b5ebe37c4a-q7x2m`, "
        "`checkout-b5ebe37c4a-z5c8k`) are healthy themselves; they just surface "
        "the upstream failure as 502.",
    ),
    Answer(
        "held-out",
        "| Service | Version | Pod |\n|---|---|---|\n| payment-api | 1.42.0 | "
        "payment-api-a9dfd1c984-h4kzp |\n| payment-api | 1.42.0 | "
        "payment-api-a9dfd1c984-w9t2r |\n| checkout | 3.4.0 | "
        "checkout-b5ebe37c4a-q7x2m |",
    ),
    Answer(
        "held-out",
        "Rollout history for shop/payment-api:\n- rev 40 → 1.40.2 (11:10 "
        "UTC)\n- rev 41 → 1.41.3 (12:10 UTC)\n- rev 42 → 1.42.0 (13:10 UTC, "
        "current)",
    ),
    Answer(
        "held-out",
        "Orders-api has been failing since about 14:04 UTC with `database "
        "unavailable`; postgres reports the pgbouncer pool is exhausted "
        "(max_client_conn 400).",
    ),
    Answer(
        "held-out",
        "Nothing was deployed to orders-api today — its current revision 7 "
        "(2.7.0) dates from 2026-11-28 14:10 UTC.",
    ),
    Answer(
        "held-out",
        "The failing span is `payment-api POST /v1/charge` (~1.1 s) on service.version=1.42.0.",
    ),
    Answer(
        "held-out",
        "Suggested action: `kubectl rollout undo deployment/payment-api -n shop --to-revision=41`",
    ),
    Answer(
        "held-out",
        "*payment-api* is at revision **42** in namespace _shop_.",
    ),
    Answer(
        "held-out",
        "The healthy comparison trace (14:07:45 UTC) went through "
        "`payment-api-bd96317554-b8n6v` on 1.41.3 in 114 ms.",
    ),
    Answer(
        "held-out",
        "Checkout's last rollout was revision 18 on Nov 29 at 14:10 UTC, so it "
        "predates the incident by a day.",
    ),
    Answer(
        "held-out",
        "Affected: payment-api (namespace shop), 2 pods; checkout (shop) indirectly.",
    ),
    Answer(
        "held-out",
        "Yes — the errors line up with the payment-api 1.42.0 release. The "
        "first failing trace started at 14:01:45Z, 51 minutes after revision 42 "
        "was created (13:10Z).",
    ),
    Answer(
        "held-out",
        "pgbouncer on `postgres-0` hit its `max_client_conn` of 400, so "
        '`orders-api` (2.7.0, pod `orders-api-5de2206a53-c3j7d`) gets "database '
        'unavailable" and returns 503.',
    ),
    Answer(
        "held-out",
        "Deployment **orders-api**: ReplicaSet orders-api-5de2206a53 (revision "
        "7). The previous ReplicaSet orders-api-e136ae80a1 ran 2.6.0.",
    ),
    Answer(
        "held-out",
        "Checkout 3.3.2 → 3.4.0 happened on 2026-11-29 (revision 17 → 18); not related.",
    ),
    Answer(
        "held-out",
        "Timeline (UTC):\n- 13:10 — payment-api 1.42.0 rolled out (revision "
        "42)\n- 14:01 — first checkout 502s\n- 14:04 — orders-api starts "
        "failing with database unavailable\n- 14:09 — still failing",
    ),
    Answer(
        "held-out",
        "Both payment-api replicas on the new ReplicaSet (`…-h4kzp` and "
        "`…-w9t2r`) throw the same NPE.",
    ),
    Answer(
        "held-out",
        "Image `registry/payment-api:1.42.0` is what's running now; the last "
        "good one was `registry/payment-api:1.41.3`.",
    ),
    Answer(
        "held-out",
        "At 14:09:30 UTC the most recent orders-api trace took 2852 ms before failing.",
    ),
    Answer(
        "held-out",
        "Service `payment-api` in `shop` reports version v1.42.0.",
    ),
    Answer(
        "held-out",
        "Recommend: roll back payment-api to 1.41.3 (revision 41) and raise "
        "pgbouncer's max_client_conn for postgres-0 separately.",
    ),
    Answer(
        "held-out",
        "It started roughly at 14:02 UTC (09:02 EST).",
    ),
    Answer(
        "held-out",
        "The incident window is 2026-11-30T14:01:45Z to 2026-11-30T14:09:32Z.",
    ),
    Answer(
        "held-out",
        "The payment-api Deployment currently runs 1.42.0 (revision 42, "
        "ReplicaSet payment-api-a9dfd1c984).",
    ),
    Answer(
        "held-out",
        "**Pods affected:**\n  - `payment-api-a9dfd1c984-h4kzp`\n    - 4 "
        "failing traces, latest 14:09:15 UTC\n  - "
        "`payment-api-a9dfd1c984-w9t2r`\n    - 4 failing traces, latest "
        "14:06:15 UTC",
    ),
    Answer(
        "held-out",
        "The rollout to 1.42.0 happened ~1 hour before errors began (13:10 vs 14:01 UTC).",
    ),
    Answer(
        "held-out",
        "Roll back `deployment/payment-api` in `shop` from rev 42 to rev 41 (image tag 1.41.3).",
    ),
    Answer(
        "held-out",
        "Current state: payment-api v1.42.0 (rev. 42); previous: v1.41.3 (rev. "
        "41); before that v1.40.2 (rev. 40).",
    ),
    Answer(
        "held-out",
        "orders-api's last deploy (2.6.0 → 2.7.0, revision 7) was on Nov 28, "
        "two days ago — so the DB issue isn't deploy-related.",
    ),
    Answer(
        "held-out",
        "The trouble started with the payment-api rollout (revision 42, image "
        'tag "1.42.0"). Since ~14:02 UTC, checkout has been getting 503s from '
        "it.",
    ),
    Answer(
        "held-out",
        "**TL;DR**: bad deploy. payment-api 1.42.0 throws an NPE; rolled back "
        "from 42 to 41 would fix it.",
    ),
    Answer(
        "held-out",
        "Checkout's own release (3.4.0) went out the day before, on Nov 29, so "
        "it isn't the culprit.",
    ),
    Answer(
        "held-out",
        "### Evidence\n* Error traces between 14:01 and 14:09 UTC all show "
        "`payment-api` returning 503.\n  * Status: `NullPointerException in "
        "ChargeHandler.applyDiscount (payment-api:1.42.0)`\n  * Pods: "
        "`payment-api-a9dfd1c984-h4kzp`, `payment-api-a9dfd1c984-w9t2r`\n* A "
        "healthy trace at 14:07:45 UTC ran on 1.41.3.",
    ),
    Answer(
        "held-out",
        "The orders-api issue is database-side: postgres-0's pgbouncer is out "
        "of connections (max_client_conn 400). orders-api itself hasn't changed "
        "since its 2.7.0 rollout (revision 7).",
    ),
    Answer(
        "held-out",
        "I'd start with a rollback of `payment-api` to revision 41 (1.41.3), "
        "then watch checkout's error rate.",
    ),
    Answer(
        "held-out",
        "First failing trace: 14:01:45 UTC (checkout → payment-api). Most "
        "recent: 14:09:30 UTC (orders-api → postgres).",
    ),
    Answer(
        "held-out",
        "payment-api's rollout history: 40 (1.40.2), 41 (1.41.3), 42 (1.42.0, current).",
    ),
    Answer(
        "held-out",
        "The NPE comes from the new build, 1.42.0 — the older ReplicaSet "
        "`payment-api-bd96317554` (1.41.3) served a request fine at 14:07:45.",
    ),
    Answer(
        "held-out",
        "Everything here is in the `shop` namespace: checkout, payment-api, "
        "orders-api and postgres.",
    ),
    Answer(
        "held-out",
        "Note that checkout (`checkout-b5ebe37c4a`) isn't broken — it's just "
        "relaying payment-api's 503 as a 502.",
    ),
    Answer(
        "held-out",
        "Yes, payment-api was deployed about an hour before the errors started "
        "(13:10 vs ~14:02 UTC).",
    ),
    Answer(
        "held-out",
        "orders-api pod `orders-api-5de2206a53-c3j7d` is timing out on INSERTs "
        'into postgres (2.8 s) with "connection pool exhausted".',
    ),
    Answer(
        "held-out",
        "Payment-api revision 42 is the current one; revision 41 is the last known good.",
    ),
    Answer(
        "held-out",
        "For orders-api, the previous revision (6) ran "
        "`registry/orders-api:2.6.0`; rolling back wouldn't help since the DB "
        "is the bottleneck.",
    ),
]

INVENTED: list[Answer] = [
    Answer(
        "held-out",
        "Both erroring pods, `payment-api-a9dfd1c984-h4kzp` and "
        "`payment-api-a9dfd1c984-x7p2q`, run 1.42.0.",
        kind="pod",
        invented="payment-api-a9dfd1c984-x7p2q",
    ),
    Answer(
        "held-out",
        "The NPE shows up on pods h4kzp and k2m9d.",
        kind="pod",
        invented="k2m9d",
    ),
    Answer(
        "held-out",
        "The pgbouncer in pod postgres-1 is refusing connections.",
        kind="pod",
        invented="postgres-1",
    ),
    Answer(
        "held-out",
        "Checkout pod `checkout-b5ebe37c4a-m4n8p` surfaces it as a 502.",
        kind="pod",
        invented="checkout-b5ebe37c4a-m4n8p",
    ),
    Answer(
        "held-out",
        "The new ReplicaSet payment-api-7c9f8d6b5 was created for 1.42.0.",
        kind="replicaset",
        invented="payment-api-7c9f8d6b5",
    ),
    Answer(
        "held-out",
        "orders-api's previous ReplicaSet, orders-api-6f8b9c1d2e, ran 2.6.0.",
        kind="replicaset",
        invented="orders-api-6f8b9c1d2e",
    ),
    Answer(
        "held-out",
        "Scale the old ReplicaSet (`payment-api-bd96317999`) back up.",
        kind="replicaset",
        invented="payment-api-bd96317999",
    ),
    Answer(
        "held-out",
        "The `billing-api` deployment in shop is also affected.",
        kind="deployment",
        invented="billing-api",
    ),
    Answer(
        "held-out",
        "Deployment `payments` was rolled back to revision 41.",
        kind="deployment",
        invented="payments",
    ),
    Answer(
        "held-out",
        "Also check deployment/cart-worker, which calls payment-api.",
        kind="deployment",
        invented="cart-worker",
    ),
    Answer(
        "held-out",
        "The errors surface in the `cart-service` service first, then checkout.",
        kind="service",
        invented="cart-service",
    ),
    Answer(
        "held-out",
        "service: inventory-api is returning 503s too.",
        kind="service",
        invented="inventory-api",
    ),
    Answer(
        "held-out",
        "Traces show `payment-gateway` returning 503 to checkout.",
        kind="service",
        invented="payment-gateway",
    ),
    Answer(
        "held-out",
        "All three Deployments live in namespace `shop-prod`.",
        kind="namespace",
        invented="shop-prod",
    ),
    Answer(
        "held-out",
        "**Namespace:** payments",
        kind="namespace",
        invented="payments",
    ),
    Answer(
        "held-out",
        "Both payment-api pods are scheduled on node gke-prod-pool-1-8f2a9c.",
        kind="node",
        invented="gke-prod-pool-1-8f2a9c",
    ),
    Answer(
        "held-out",
        "postgres-0 runs on the `ip-10-0-3-17.ec2.internal` node.",
        kind="node",
        invented="ip-10-0-3-17.ec2.internal",
    ),
    Answer(
        "held-out",
        "The current image is `registry/payment-api:1.42.1`.",
        kind="image",
        invented="registry/payment-api:1.42.1",
    ),
    Answer(
        "held-out",
        "It's running `gcr.io/acme/payment-api:1.42.0`.",
        kind="image",
        invented="gcr.io/acme/payment-api:1.42.0",
    ),
    Answer(
        "held-out",
        "payment-api:1.42.0 replaced payment-api:1.41.0.",
        kind="image",
        invented="payment-api:1.41.0",
    ),
    Answer(
        "held-out",
        "The 1.42.1 rollout broke charge handling.",
        kind="version",
        invented="1.42.1",
    ),
    Answer(
        "held-out",
        "payment-api was upgraded from 1.41.2 to 1.42.0.",
        kind="version",
        invented="1.41.2",
    ),
    Answer(
        "held-out",
        "The checkout service is running version 1.42.0.",
        kind="version",
        invented="1.42.0",
    ),
    Answer(
        "held-out",
        "**Version:** 1.43.0",
        kind="version",
        invented="1.43.0",
    ),
    Answer(
        "held-out",
        "orders-api was bumped to v2.8.0 two days ago.",
        kind="version",
        invented="v2.8.0",
    ),
    Answer(
        "held-out",
        "Roll payment-api back to the last good build, 1.41.5.",
        kind="version",
        invented="1.41.5",
    ),
    Answer(
        "held-out",
        "payment-api is on revision 43.",
        kind="revision",
        invented="43",
    ),
    Answer(
        "held-out",
        "Roll back to revision 39.",
        kind="revision",
        invented="39",
    ),
    Answer(
        "held-out",
        "checkout's current revision is 19.",
        kind="revision",
        invented="19",
    ),
    Answer(
        "held-out",
        "orders-api (revision 8) has been stable.",
        kind="revision",
        invented="8",
    ),
    Answer(
        "held-out",
        "Rolled back from 42 to 38 would be safest.",
        kind="revision",
        invented="38",
    ),
    Answer(
        "held-out",
        "The 1.42.0 rollout happened at 12:40 UTC.",
        kind="time",
        invented="12:40",
    ),
    Answer(
        "held-out",
        "Errors started at 13:45 UTC.",
        kind="time",
        invented="13:45",
    ),
    Answer(
        "held-out",
        "The first 502 was at 14:20 UTC.",
        kind="time",
        invented="14:20",
    ),
    Answer(
        "held-out",
        "payment-api 1.42.0 went out at 14:00 UTC, right before the errors.",
        kind="time",
        invented="14:00",
    ),
    Answer(
        "held-out",
        "Revision 42 was created at 2026-11-30 13:50 UTC.",
        kind="time",
        invented="13:50",
    ),
    Answer(
        "held-out",
        "Orders-api started failing at 2:15 PM UTC.",
        kind="time",
        invented="2:15 PM",
    ),
    Answer(
        "held-out",
        "first failure at 09:30 EST",
        kind="time",
        invented="09:30",
    ),
    Answer(
        "held-out",
        "Errors ran from 14:01 to 14:19 UTC.",
        kind="time",
        invented="14:19",
    ),
    Answer(
        "held-out",
        "The 1.42.0 deploy landed ~13:40 UTC and the errors followed.",
        kind="time",
        invented="13:40",
    ),
    Answer(
        "held-out",
        "**Deployed at:** 2026-11-30T12:45:00Z (revision 42)",
        kind="time",
        invented="2026-11-30T12:45:00Z",
    ),
    Answer(
        "held-out",
        'The trouble started with the payment-api rollout (revision 42, image tag "1.42.2").',
        kind="version",
        invented="1.42.2",
    ),
    Answer(
        "held-out",
        "Since ~14:32 UTC, checkout has been getting 503s from payment-api.",
        kind="time",
        invented="14:32",
    ),
    Answer(
        "held-out",
        "**Pods:** `payment-api-a9dfd1c984-h4kzp`, `payment-api-a9dfd1c984-q2w8e`",
        kind="pod",
        invented="payment-api-a9dfd1c984-q2w8e",
    ),
    Answer(
        "held-out",
        "orders-api hasn't changed since its 2.7.1 rollout.",
        kind="version",
        invented="2.7.1",
    ),
    Answer(
        "held-out",
        "I'd roll `payment-api` back to revision 38.",
        kind="revision",
        invented="38",
    ),
    Answer(
        "held-out",
        "Everything here is in the `shop-eu` namespace.",
        kind="namespace",
        invented="shop-eu",
    ),
    Answer(
        "held-out",
        "The older ReplicaSet `payment-api-bd96317500` served a request fine.",
        kind="replicaset",
        invented="payment-api-bd96317500",
    ),
    Answer(
        "held-out",
        "orders-api's current revision is 9 and it runs 2.7.0.",
        kind="revision",
        invented="9",
    ),
    Answer(
        "held-out",
        "The checkout → `fraud-check` call also failed.",
        kind="service",
        invented="fraud-check",
    ),
    Answer(
        "held-out",
        "payment-api was deployed at 13:40 UTC, about 20 minutes before the errors.",
        kind="time",
        invented="13:40",
    ),
]
