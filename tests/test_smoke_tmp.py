from sandbox import Reply
async def test_smoke(investigator, gemini, scenario, thread_id):
    real = scenario.error_trace_ids[2]
    gemini.script(
        Reply.call("query_tempo_traces", traceql='{ resource.service.name = "payment-api" && status = error }'),
        Reply.text(f"payment-api fails, see trace {real} and deadbeefdeadbeefdeadbeefdeadbeef"),
        Reply.text(f"payment-api fails, see trace {real}"),
    )
    r = await investigator.investigate(thread_id, "why 500s?", "U1")
    print(r.model_dump_json(indent=1))
    for q in gemini.requests: print("----", q.text()[-600:])
    assert False
