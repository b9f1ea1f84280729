"""Floor 1: actions. ActionRequest, its state machine, rule gates, LLM judge, executor.

Imports neither `graph` nor `bot`.
"""
