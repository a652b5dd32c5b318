"""Domain exceptions. The class name is the error name Step Functions sees (the Lambda
runtime reports ``errorType = type(exc).__name__``), so the ASL's ``Retry``/``Catch`` match on
these names; the API maps them to HTTP statuses in one place.
"""

from __future__ import annotations


class QuayError(Exception):
    """Base of every domain error."""

    http_status = 400


class TransientError(QuayError):
    """A fault worth retrying with backoff (e.g. DynamoDB throttling). Listed in the ASL
    ``Retry`` (design §2.1). Every write is conditional and keyed from the run, so a retry never
    writes twice."""

    http_status = 503


class Misconfigured(QuayError):
    """A deployed function's environment lacks a setting it reads, or holds one it cannot use:
    the operator's fault, never the caller's. The message names the variables
    (``"misconfigured: ROOM_TABLE_NAME (missing)"``); the API answers 500 with it and logs it
    (docs/design.md §1: settings are validated per function at its first use)."""

    http_status = 500

    def __init__(self, variables: list[str], problems: list[str]) -> None:
        self.variables = list(variables)
        super().__init__("misconfigured: " + "; ".join(problems))


class RunTimedOut(QuayError):
    """The run used up its active-time budget (design §2: 300 s excluding parked time)."""


class ModelCallFailed(QuayError):
    """The model call ended without a reply (final error, cap reached, retry-after > 20 s)."""


class BudgetExhausted(ModelCallFailed):
    """The run's next model request would pass a budget of its company: it is not sent (design
    §12.4). Its own name, so a run it ends is counted as a budget reached, not as a fault
    (``RunFailed_budget``, docs/design.md §13)."""


class RunStateInvalid(QuayError):
    """The state handed to a phase does not have the shape the phase needs."""


class NotFound(QuayError):
    http_status = 404


class Forbidden(QuayError):
    http_status = 403


class Conflict(QuayError):
    http_status = 409


class InvalidInput(QuayError):
    http_status = 400


class PayloadTooLarge(QuayError):
    """A value over its size limit (a message text over 32 KiB of UTF-8, a room file over 25 MB)."""

    http_status = 413


class LimitReached(Conflict):
    """A write past one of the limits on what one item holds (a room's agents or member
    companies, a company's people or policy rules; docs/design.md §1). The message names the
    limit and its setting; nothing was written."""

    def __init__(self, what: str, limit: int, setting: str) -> None:
        self.limit, self.setting = limit, setting
        super().__init__(f"{what}: the limit is {limit} ({setting})")


class RunStopped(QuayError):
    """A person paused the run's agent or stopped its chain after the run's claim (design §12.2):
    the run writes nothing more to the room. A guarded write raises it when its transaction's
    stop guard fails (nothing of that transaction was written); the phases record the final
    status ``stopped`` instead of raising it on. It is also the error name sent with
    ``SendTaskFailure`` to a run parked on an approval, which the ASL's Map catches by name."""


class ApprovalRejected(QuayError):
    """The error name sent with ``SendTaskFailure`` when a person denies a held action; the
    ASL's Map iteration catches it by name and records the outcome ``rejected``."""
