"""The model registry through gantry.Client: a published model listed, its versions read, an alias
promoted, a racing move refused (AliasConflictError with where the alias points), a rollback, and
another team's caller answered as for an unknown model."""

from __future__ import annotations

import pytest

import gantry
from conftest import run_request


def test_models_promote_conflict_rollback(client: gantry.Client, stranger: gantry.Client) -> None:
    first = client.submit_run(run_request("py-registry", args=["--dropout=0.2"])).wait(timeout=120, poll=0.3)
    second = client.submit_run(run_request("py-registry", args=["--lr=0.003"])).wait(timeout=120, poll=0.3)
    assert first["phase"] == second["phase"] == "Succeeded"
    names = [m["name"] for m in client.list_models()]
    assert "py-registry" in names
    model = client.get_model("py-registry")
    assert [v["version"] for v in model["versions"]] == [2, 1]
    assert client.get_model_version("py-registry", 1)["runId"] == first["runId"]

    moved = client.promote("py-registry", 1, "production", expected_version=None, reason="first")
    assert moved["version"] == 1 and moved["seq"] == 1
    with pytest.raises(gantry.AliasConflictError) as conflict:
        client.promote("py-registry", 2, "production", expected_version=None)
    assert conflict.value.current_version == 1 and conflict.value.status == 409
    client.promote("py-registry", 2, "production", expected_version=1)
    back = client.rollback("py-registry")
    assert back["version"] == 1 and back["previousVersion"] == 2
    assert back["reason"] == "rollback from version 2"

    with pytest.raises(gantry.ValidationError) as bad:
        client.promote("py-registry", 0)
    assert bad.value.field == "version"
    with pytest.raises(gantry.ForbiddenError):
        stranger.list_models()
    with pytest.raises(gantry.NotFoundError):
        client.get_model("never-published")
