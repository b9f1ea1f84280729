"""How a tool says it could not do its job."""


class ToolFailed(Exception):
    """The system behind a tool failed (Tempo down, say). The model still gets the message,
    as an error result; the turn records a failed tool call (Steps view, notices, metrics)."""
