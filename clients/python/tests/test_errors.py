"""The mapping of error answers to classes, including bodies that name nothing (API Gateway's own)."""

from __future__ import annotations

import pytest

import gantry
from gantry.errors import error_for


@pytest.mark.parametrize(
    "status, body, cls",
    [
        (400, {"error": "ValidationError", "message": "the request is invalid", "issues": []}, gantry.ValidationError),
        (400, {"error": "InvalidJson", "message": "not JSON"}, gantry.InvalidJson),
        (400, {"message": "Bad Request"}, gantry.BadRequestError),
        (401, {"error": "Unauthenticated", "message": "issuer"}, gantry.Unauthenticated),
        (403, {"error": "ForbiddenError", "message": "no", "rule": "no"}, gantry.ForbiddenError),
        (403, {"message": "Forbidden"}, gantry.ForbiddenError),  # API Gateway's IAM authorizer
        (404, {"error": "NotFoundError", "message": "no run"}, gantry.NotFoundError),
        (404, {"message": "Not Found"}, gantry.NotFoundError),
        (409, {"error": "RunFinishedError", "message": "ended", "phase": "Succeeded"}, gantry.RunFinishedError),
        (409, {"error": "SweepFinishedError", "message": "ended", "phase": "Failed"}, gantry.SweepFinishedError),
        (409, {"error": "IdempotencyConflictError", "message": "key"}, gantry.IdempotencyConflictError),
        (409, {"error": "RunLogsUnavailableError", "message": "no pod", "phase": "Pending"}, gantry.RunLogsUnavailableError),
        (409, {"message": "Conflict"}, gantry.ConflictError),
        (413, {"error": "PayloadTooLarge", "message": "big"}, gantry.PayloadTooLarge),
        (415, {"error": "UnsupportedMediaType", "message": "json"}, gantry.UnsupportedMediaType),
        (429, {"error": "TeamLimitError", "message": "cap", "limit": "maxRunsInFlight"}, gantry.TeamLimitError),
        (500, {"error": "InternalError", "message": "internal error", "requestId": "r-1"}, gantry.InternalError),
        (503, {"error": "ServiceUnavailable", "message": "retry", "requestId": "r-2"}, gantry.ServiceUnavailable),
        (418, {"message": "teapot"}, gantry.ApiError),
    ],
)
def test_error_classes(status: int, body: dict, cls: type) -> None:
    err = error_for(status, body, "GET", "/v1/runs/x")
    assert type(err) is cls
    assert err.status == status and "GET /v1/runs/x" in str(err)


def test_a_name_from_another_status_family_does_not_win() -> None:
    # A 403 stays a ForbiddenError whatever the body claims.
    assert type(error_for(403, {"error": "NotFoundError", "message": "x"})) is gantry.ForbiddenError


def test_validation_issues_fields_and_rules() -> None:
    err = error_for(
        400,
        {
            "error": "ValidationError",
            "message": "the request is invalid",
            "issues": [{"field": "numNodes", "rule": "Too small"}, {"field": "", "rule": "whole"}],
        },
    )
    assert isinstance(err, gantry.ValidationError)
    assert err.issues == [gantry.Issue("numNodes", "Too small"), gantry.Issue("", "whole")]
    assert (err.field, err.rule) == ("numNodes", "Too small")
    assert "numNodes: Too small" in str(err) and "(request): whole" in str(err)


def test_team_limit_carries_limit_and_retry_after() -> None:
    err = error_for(429, {"error": "TeamLimitError", "message": "cap", "limit": "maxGpusInFlight"}, retry_after="7")
    assert isinstance(err, gantry.TeamLimitError)
    assert err.limit == "maxGpusInFlight" and err.retry_after_seconds == 7.0


def test_internal_error_quotes_the_request_id() -> None:
    err = error_for(500, {"error": "InternalError", "message": "internal error", "requestId": "abc"})
    assert err.request_id == "abc" and "abc" in str(err)
