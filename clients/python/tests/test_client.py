"""gantry.Client against the embedded default: submit → wait, metrics, logs, events, lists,
cancel, a failed run, a sweep, and the API's errors as typed exceptions."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Dict, List

import pytest

import gantry
from conftest import run_request, stop, wait_for


@pytest.fixture(scope="module")
def succeeded(client: gantry.Client) -> Dict[str, Any]:
    """One run followed to its end, its log followed while it trains (shared by several tests)."""
    run = client.submit_run(run_request("py-happy", args=["--lr=0.003", "--batch-size=64"]))
    lines: List[str] = []
    follower = threading.Thread(target=lambda: lines.extend(run.logs(follow=True, poll=0.3)))
    follower.start()
    final = run.wait(timeout=120, poll=0.3)
    follower.join(timeout=60)
    return {"run": run, "final": final, "lines": lines}


def test_submit_wait_succeeds_with_metrics_and_events(client: gantry.Client, succeeded: Dict[str, Any]) -> None:
    run, final = succeeded["run"], succeeded["final"]
    # Assess: the final view, as GET /v1/runs/{id} has it.
    assert final["phase"] == "Succeeded"
    assert run.phase == "Succeeded" and run.done
    assert final["runId"] == run.id and final["modelName"] == "py-happy"
    assert [t["phase"] for t in final["transitions"]][-1] == "Succeeded"
    assert run.idempotency_key and run.idempotency_key.startswith("gantry-py-")
    # The metric history the simulated training reported, in the API's shape.
    history = run.metrics()
    assert history["runId"] == run.id
    loss = history["series"]["loss"]
    assert len(loss) >= 2
    assert set(loss[0]) >= {"t", "v"} and isinstance(loss[0]["v"], float)
    assert [p["t"] for p in loss] == sorted(p["t"] for p in loss)
    assert history["series"]["accuracy"][-1]["v"] == pytest.approx(final["metrics"]["accuracy"])
    # Lifecycle events, oldest first.
    types = [e["type"] for e in run.events()]
    assert types[0] == "gantry.run.accepted" and types[-1] == "gantry.run.succeeded"
    assert "gantry.run.running" in types


def test_logs_follow_reads_the_training_log(succeeded: Dict[str, Any]) -> None:
    lines = succeeded["lines"]
    assert any("starting training" in line for line in lines), lines[:5]
    assert any("step" in line and "loss=" in line for line in lines)
    # No line twice: each poll prints only what follows the overlap with the previous tail.
    assert len(lines) == len(set(lines))


def test_logs_of_an_ended_run_come_from_the_archive(succeeded: Dict[str, Any]) -> None:
    run = succeeded["run"]

    def archived() -> Any:
        view = run.log_tail(node=0)
        return view if view.get("source") == "archive" else None

    # The job (with its pods) is deleted a moment after the run ends; its logs were saved first.
    view = wait_for("the ended run's archived logs", archived, 60, 0.3)
    assert view["lines"] and view["attempt"] == 1
    assert run.logs(node=0, attempt=1) == view["lines"]


def test_replay_with_the_same_key_is_the_same_run(client: gantry.Client, succeeded: Dict[str, Any]) -> None:
    first = succeeded["run"]
    again = client.submit_run(run_request("py-happy", args=["--lr=0.003", "--batch-size=64"]), first.idempotency_key)
    assert again.id == first.id and again.replayed


def test_get_and_list_runs_page_by_page(client: gantry.Client, succeeded: Dict[str, Any]) -> None:
    run = client.get_run(succeeded["run"].id)
    assert run.phase == "Succeeded" and run.view["request"]["modelName"] == "py-happy"
    # page_size=1: every run of the model comes from its own page, none twice.
    extra = client.submit_run(run_request("py-happy"))
    ids = [r.id for r in client.list_runs(model="py-happy", page_size=1)]
    assert len(ids) == len(set(ids)) >= 2
    assert {run.id, extra.id} <= set(ids)
    stop(extra)


def test_submit_from_json_and_yaml_files(client: gantry.Client, tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    as_json = tmp_path / "run.json"
    as_json.write_text(json.dumps(run_request("py-files")))
    as_yaml = tmp_path / "run.yaml"
    as_yaml.write_text(
        "modelName: py-files\nteam: demo\nruntime: {name: torch-distributed}\n"
        "image: registry.local/vision/train:1.0\nnumNodes: 1\nresourcesPerNode: {gpu: 1}\nqueue: demo-queue\n"
    )
    a = client.submit_run(as_json)
    b = client.submit_run(str(as_yaml))
    assert a.id != b.id
    assert client.get_run(b.id).view["request"]["modelName"] == "py-files"
    for r in (a, b):
        stop(r)


def test_cancel_ends_the_run_cancelled(client: gantry.Client) -> None:
    run = client.submit_run(run_request("py-cancel"))
    answer = run.cancel()
    assert answer["runId"] == run.id
    with pytest.raises(gantry.RunCancelledError) as err:
        run.wait(timeout=60, poll=0.3)
    assert err.value.phase == "Cancelled" and run.phase == "Cancelled"


def test_a_failed_run_raises_with_its_reason(client: gantry.Client) -> None:
    # The simulated training code crashes at 30 % when its env asks for it.
    run = client.submit_run(run_request("py-fails", env={"SIM_FAIL_AT_PERCENT": "30"}))
    with pytest.raises(gantry.RunFailedError) as err:
        run.wait(timeout=120, poll=0.3)
    assert err.value.run_id == run.id
    assert err.value.reason == "TrainingFailed"
    assert "TrainingFailed" in str(err.value)


def test_wait_timeout(client: gantry.Client) -> None:
    run = client.submit_run(run_request("py-timeout"))
    with pytest.raises(gantry.WaitTimeout) as err:
        run.wait(timeout=0.2, poll=0.1)
    assert err.value.view["runId"] == run.id
    stop(run)


def test_validation_error_names_the_field_and_rule(client: gantry.Client) -> None:
    with pytest.raises(gantry.ValidationError) as err:
        client.submit_run(run_request("py-bad", numNodes=0))
    e = err.value
    assert e.status == 400 and e.error == "ValidationError"
    assert e.field == "numNodes" and e.rule
    assert "numNodes" in str(e)
    # Dry run: the schema is checked as submit checks it; the cluster checks answer valid or not.
    with pytest.raises(gantry.ValidationError) as dry:
        client.validate_run(run_request("py-bad", numNodes=0))
    assert dry.value.field == "numNodes"
    missing = client.validate_run(run_request("py-bad", runtime={"name": "no-such-runtime"}))
    assert missing["valid"] is False
    assert [c["status"] for c in missing["checks"] if c["name"] == "runtime"] == ["failed"]
    ok = client.validate_run(run_request("py-ok"))
    assert ok["valid"] is True and {c["name"] for c in ok["checks"]} >= {"schema", "tenancy"}


def test_forbidden_is_a_403_with_the_rule(stranger: gantry.Client, succeeded: Dict[str, Any]) -> None:
    with pytest.raises(gantry.ForbiddenError) as err:
        stranger.get_run(succeeded["run"].id)
    assert err.value.status == 403 and err.value.rule


def test_forbidden_team(client: gantry.Client) -> None:
    with pytest.raises(gantry.ForbiddenError) as err:
        client.submit_run(run_request("py-other", team="someone-else"))
    assert err.value.status == 403 and err.value.rule


def test_not_found_is_a_404(client: gantry.Client) -> None:
    with pytest.raises(gantry.NotFoundError) as err:
        client.get_run("run-aaaaaaaaaaaaaaaaaaaa")
    assert err.value.status == 404


def test_conflicts_are_409s(client: gantry.Client, succeeded: Dict[str, Any]) -> None:
    run = succeeded["run"]
    # Cancel of a run that ended.
    with pytest.raises(gantry.RunFinishedError) as finished:
        run.cancel()
    assert finished.value.status == 409 and finished.value.phase == "Succeeded"
    # The same key with another body.
    with pytest.raises(gantry.IdempotencyConflictError) as conflict:
        client.submit_run(run_request("py-happy", numNodes=2), run.idempotency_key)
    assert conflict.value.status == 409 and isinstance(conflict.value, gantry.ConflictError)


def test_a_sweep_to_its_best_trial(client: gantry.Client) -> None:
    sweep = client.submit_sweep(
        {
            "template": run_request("py-sweep"),
            "parameters": [{"name": "lr", "type": "continuous", "min": 0.0001, "max": 0.1, "scale": "log"}],
            "objective": {"metric": "accuracy", "direction": "maximize"},
            "algorithm": {"name": "random", "seed": 5},
            "maxTrials": 3,
            "parallelTrials": 3,
        }
    )
    assert sweep.id.startswith("swp-")
    final = sweep.wait(timeout=180, poll=0.5)
    assert final["phase"] == "Succeeded"
    trials = sweep.trials()
    assert len(trials) == 3
    scored = [t for t in trials if isinstance(t.get("objective"), (int, float))]
    assert scored, trials
    best = sweep.best
    assert best is not None
    assert best["objective"] == max(t["objective"] for t in scored)
    best_run = sweep.best_run()
    assert best_run is not None and best_run.phase == "Succeeded"
    assert best_run.view["trial"]["sweepId"] == sweep.id
    # The trials are runs of the sweep.
    assert {r.id for r in client.list_runs(sweep_id=sweep.id)} == {t["runId"] for t in trials}
    assert any(s.id == sweep.id for s in client.list_sweeps())


def test_a_multi_objective_sweep_and_its_pareto_front(client: gantry.Client) -> None:
    sweep = client.submit_sweep(
        {
            "template": run_request("py-pareto"),
            "parameters": [{"name": "lr", "type": "continuous", "min": 0.0001, "max": 0.1, "scale": "log"}],
            "objectives": [
                {"metric": "accuracy", "direction": "maximize"},
                {"metric": "loss", "direction": "minimize"},
            ],
            "select": {"constraint": {"metric": "loss", "max": 100}, "optimize": "accuracy"},
            "algorithm": {"name": "random", "seed": 5},
            "maxTrials": 3,
            "parallelTrials": 3,
        }
    )
    final = sweep.wait(timeout=180, poll=0.5)
    assert final["phase"] == "Succeeded"
    assert [o["metric"] for o in sweep.objectives or []] == ["accuracy", "loss"]
    front = sweep.pareto_front
    assert front, final
    trials = {t["index"]: t for t in sweep.trials()}
    for member in front:
        values = trials[member["trialIndex"]]["objectives"]
        assert member["values"] == {"accuracy": values[0], "loss": values[1]}
    assert sweep.best is not None and sweep.best["trialIndex"] in {m["trialIndex"] for m in front}
    # Exactly one of objective and objectives: a 400 naming the field.
    with pytest.raises(gantry.ValidationError) as both:
        client.submit_sweep(
            {
                "template": run_request("py-pareto"),
                "parameters": [{"name": "lr", "type": "continuous", "min": 0.0001, "max": 0.1}],
                "objective": {"metric": "accuracy", "direction": "maximize"},
                "objectives": [
                    {"metric": "accuracy", "direction": "maximize"},
                    {"metric": "loss", "direction": "minimize"},
                ],
                "maxTrials": 3,
            }
        )
    assert both.value.status == 400 and "objectives" in str(both.value)


def test_unreachable_endpoint() -> None:
    dead = gantry.Client("http://127.0.0.1:9", principal="x", retries=0, timeout=2)
    with pytest.raises(gantry.UnreachableError):
        dead.get_run("run-aaaaaaaaaaaaaaaaaaaa")


def test_yaml_without_pyyaml_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("modelName: x\n")
    monkeypatch.setitem(__import__("sys").modules, "yaml", None)
    with pytest.raises(gantry.MissingDependencyError, match="PyYAML"):
        gantry.load_request(path)
    # JSON needs nothing.
    (tmp_path / "run.json").write_text('{"modelName": "x"}')
    assert gantry.load_request(tmp_path / "run.json") == {"modelName": "x"}


def test_progress_without_tqdm_says_what_to_install(client: gantry.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "tqdm", None)
    monkeypatch.setitem(__import__("sys").modules, "tqdm.auto", None)
    with pytest.raises(gantry.MissingDependencyError, match="tqdm"):
        client.run("run-aaaaaaaaaaaaaaaaaaaa").wait(progress=True)


def test_usage_and_queue_position(client: gantry.Client, succeeded: Dict[str, Any]) -> None:
    """``usage()``: the team's GPU-hours from its ledger (the run that succeeded is in it); a bad
    period is a ValidationError naming the field. ``queue_position()`` of a run that ended: not queued."""
    run = succeeded["run"]
    used = succeeded["final"]["gpuHours"]["used"]
    usage = client.usage()
    assert usage["team"] == "demo" and usage["granularity"] == "month"
    assert usage["used"] >= used > 0
    assert sum(d["used"] for d in usage["days"]) == pytest.approx(usage["used"], abs=1e-5)
    assert client.usage(model="py-happy")["used"] >= used
    with pytest.raises(gantry.ValidationError) as bad:
        client.usage(period="2026-13")
    assert bad.value.field == "period"
    position = run.queue_position()
    assert position["queued"] is False and position["phase"] == "Succeeded"
