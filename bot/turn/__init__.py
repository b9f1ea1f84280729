"""The durable turn: a question recorded in Redis before Slack hears 200, queued, run by any
worker in order per thread, with the thread's context and memory."""
