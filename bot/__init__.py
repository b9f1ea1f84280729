"""Floor 3, in the order a question flows: `inbound` (a Slack event comes in) → `turn` (a
durable turn) → `outbound` (an answer goes out); `process` hosts them and wires the floors below."""
