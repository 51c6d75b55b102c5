"""Errors of the Gantry client.

The API answers an error with a JSON body ``{"error": <name>, "message": ..., ...}``
(functions/api/_http.ts ``errorResponse``). Each ``error`` name has a class of the same name here,
so ``except gantry.ValidationError`` reads like the API's documentation. HTTP 403, 404 and 409
have their own classes whatever the body says (API Gateway's own refusals carry no name).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Type


class GantryError(Exception):
    """Base of every error this package raises."""


class Issue(NamedTuple):
    """One problem in a request: the dotted field ("" for the whole request) and the rule it broke."""

    field: str
    rule: str


class ApiError(GantryError):
    """The API answered with an error status (4xx/5xx)."""

    status: int
    error: str
    body: Dict[str, Any]
    request_id: Optional[str]

    def __init__(self, status: int, body: Mapping[str, Any], method: str = "", path: str = "") -> None:
        self.status = status
        self.body = dict(body)
        self.error = str(body.get("error") or type(self).__name__)
        self.request_id = body.get("requestId") if isinstance(body.get("requestId"), str) else None
        self.method = method
        self.path = path
        super().__init__(self._describe())

    @property
    def message(self) -> str:
        return str(self.body.get("message", ""))

    def _describe(self) -> str:
        where = f" ({self.method} {self.path})" if self.method else ""
        text = f"HTTP {self.status} {self.error}{where}: {self.message}"
        if self.request_id:
            text += f" [request {self.request_id}]"
        return text


class BadRequestError(ApiError):
    """HTTP 400 whose body names no known error."""


class ValidationError(BadRequestError):
    """HTTP 400: the request breaks the schema or a limit. ``issues`` names each field and its rule."""

    @property
    def issues(self) -> List[Issue]:
        raw = self.body.get("issues")
        if not isinstance(raw, list):
            return []
        return [Issue(str(i.get("field", "")), str(i.get("rule", ""))) for i in raw if isinstance(i, dict)]

    @property
    def field(self) -> Optional[str]:
        """The first offending field (dotted path)."""
        issues = self.issues
        return issues[0].field if issues else None

    @property
    def rule(self) -> Optional[str]:
        """The rule the first offending field breaks."""
        issues = self.issues
        return issues[0].rule if issues else None

    def _describe(self) -> str:
        base = super()._describe()
        lines = [f"  {i.field or '(request)'}: {i.rule}" for i in self.issues]
        return "\n".join([base, *lines]) if lines else base


class InvalidJson(BadRequestError):
    """HTTP 400: the body is not JSON."""


class Unauthenticated(ApiError):
    """HTTP 401: the credentials are not accepted (e.g. a JWT from another issuer)."""


class ForbiddenError(ApiError):
    """HTTP 403: the caller's team may not do this. ``rule`` is the tenancy rule broken."""

    @property
    def rule(self) -> Optional[str]:
        r = self.body.get("rule")
        return r if isinstance(r, str) else None


class NotFoundError(ApiError):
    """HTTP 404: no such run or sweep (or one of another team)."""


class ConflictError(ApiError):
    """HTTP 409."""

    @property
    def phase(self) -> Optional[str]:
        p = self.body.get("phase")
        return p if isinstance(p, str) else None


class IdempotencyConflictError(ConflictError):
    """HTTP 409: the idempotency key was used before with another request."""


class RunFinishedError(ConflictError):
    """HTTP 409: cancel of a run that already ended; ``phase`` says how."""


class SweepFinishedError(ConflictError):
    """HTTP 409: cancel of a sweep that already ended; ``phase`` says how."""


class RunLogsUnavailableError(ConflictError):
    """HTTP 409: the node's log cannot be read (no pod yet, or the run's job is gone)."""


class AliasConflictError(ConflictError):
    """HTTP 409: the model alias no longer points at ``expected_version``; ``current_version`` says where it does."""

    @property
    def current_version(self) -> Optional[int]:
        v = self.body.get("currentVersion")
        return v if isinstance(v, int) else None


class PayloadTooLarge(ApiError):
    """HTTP 413."""


class UnsupportedMediaType(ApiError):
    """HTTP 415."""


class TeamLimitError(ApiError):
    """HTTP 429: the team's runs or GPUs in flight are at its cap; submit again later with the same key."""

    @property
    def limit(self) -> Optional[str]:
        v = self.body.get("limit")
        return v if isinstance(v, str) else None

    retry_after_seconds: Optional[float] = None


class ServiceUnavailable(ApiError):
    """HTTP 503: a backing service is unavailable; retried by the client before it is raised."""


class InternalError(ApiError):
    """HTTP 500: quote ``request_id`` when reporting it."""


class UnreachableError(GantryError):
    """The API could not be reached, or the request could not be signed."""


class MissingDependencyError(GantryError, ImportError):
    """An optional dependency is needed for what was asked; the message names the pip command."""


class RunEndedError(GantryError):
    """``wait()`` saw the run end otherwise than ``Succeeded``."""

    def __init__(self, view: Mapping[str, Any]) -> None:
        self.view = dict(view)
        self.run_id = str(view.get("runId", ""))
        self.phase = str(view.get("phase", ""))
        self.reason: Optional[str] = view.get("reason") if isinstance(view.get("reason"), str) else None
        msg = view.get("message")
        self.detail: Optional[str] = msg if isinstance(msg, str) else None
        text = f"run {self.run_id} ended {self.phase}"
        if self.reason:
            text += f" ({self.reason})"
        if self.detail:
            text += f": {self.detail}"
        super().__init__(text)


class RunFailedError(RunEndedError):
    """The run ended ``Failed``; ``reason`` is Gantry's (TrainingFailed, AdmissionTimeout, …)."""


class RunCancelledError(RunEndedError):
    """The run ended ``Cancelled`` (by a caller, or stopped early by its sweep: reason EarlyStopped)."""


class SweepEndedError(GantryError):
    """``Sweep.wait()`` saw the sweep end otherwise than ``Succeeded``."""

    def __init__(self, view: Mapping[str, Any]) -> None:
        self.view = dict(view)
        self.sweep_id = str(view.get("sweepId", ""))
        self.phase = str(view.get("phase", ""))
        self.reason: Optional[str] = view.get("reason") if isinstance(view.get("reason"), str) else None
        text = f"sweep {self.sweep_id} ended {self.phase}"
        if self.reason:
            text += f" ({self.reason})"
        if isinstance(view.get("message"), str):
            text += f": {view['message']}"
        super().__init__(text)


class SweepFailedError(SweepEndedError):
    """The sweep ended ``Failed`` (TooManyFailedTrials, NoSuccessfulTrial, ChainedRunFailed, …)."""


class SweepCancelledError(SweepEndedError):
    """The sweep ended ``Cancelled``."""


class WaitTimeout(GantryError, TimeoutError):
    """``wait(timeout=…)`` ran out before the run or sweep ended; ``view`` is the last one read."""

    def __init__(self, what: str, view: Mapping[str, Any], timeout: float) -> None:
        self.view = dict(view)
        super().__init__(f"{what} still {view.get('phase')} after {timeout:g} s")


# The API's error names (the body's `error`) → class.
_BY_NAME: Dict[str, Type[ApiError]] = {
    "ValidationError": ValidationError,
    "InvalidJson": InvalidJson,
    "Unauthenticated": Unauthenticated,
    "ForbiddenError": ForbiddenError,
    "NotFoundError": NotFoundError,
    "IdempotencyConflictError": IdempotencyConflictError,
    "RunFinishedError": RunFinishedError,
    "SweepFinishedError": SweepFinishedError,
    "RunLogsUnavailableError": RunLogsUnavailableError,
    "AliasConflictError": AliasConflictError,
    "TeamLimitError": TeamLimitError,
    "PayloadTooLarge": PayloadTooLarge,
    "UnsupportedMediaType": UnsupportedMediaType,
    "ServiceUnavailable": ServiceUnavailable,
    "InternalError": InternalError,
}

# When the body names nothing we know (e.g. API Gateway's own `{"message": "Forbidden"}`).
_BY_STATUS: Dict[int, Type[ApiError]] = {
    400: BadRequestError,
    401: Unauthenticated,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    429: TeamLimitError,
    500: InternalError,
    503: ServiceUnavailable,
}


def error_for(
    status: int,
    body: Mapping[str, Any],
    method: str = "",
    path: str = "",
    retry_after: Optional[str] = None,
) -> ApiError:
    """The exception for an error answer: by the body's ``error`` name, else by status."""
    cls = _BY_NAME.get(str(body.get("error", "")))
    # The name wins only when it agrees with the status family (a 403 stays a ForbiddenError).
    if cls is None or (status in (403, 404, 409) and not issubclass(cls, _BY_STATUS[status])):
        cls = _BY_STATUS.get(status, ApiError)
    err = cls(status, body, method, path)
    if isinstance(err, TeamLimitError) and retry_after and retry_after.isdigit():
        err.retry_after_seconds = float(retry_after)
    return err
