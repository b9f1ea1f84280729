"""The agent's tools: one module per external system, one client class each."""
