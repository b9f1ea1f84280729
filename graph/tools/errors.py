"""How a tool says it could not do its job."""


class ToolFailed(Exception):
    """The system behind a tool failed or refused (Tempo down, a Kubernetes API error).

    Raised, so the call is recorded as failed (its ToolMessage has `status="error"`; the
    Steps view, the notices and the metrics say so). The model still reads the message,
    written for it, and whether the same call may work later.
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable

    def for_model(self) -> str:
        advice = (
            "The same call may work if retried later."
            if self.retryable
            else "Retrying the same call will not help."
        )
        return f"{self} {advice}"
