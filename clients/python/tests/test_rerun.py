"""Client.rerun and Run.rerun against the embedded default: the same request as a new run, with
overrides merged in, replayed under the same key, and a bad override named; list_sweeps' summaries."""

from __future__ import annotations

import pytest

import gantry
from conftest import run_request, stop


def test_rerun_is_a_new_run_of_the_same_request_with_overrides(client: gantry.Client) -> None:
    # Prepare: a run that stays Pending (more GPUs than the queue's quota), so nothing else waits.
    original = client.submit_run(
        run_request("py-rerun", numNodes=2, resourcesPerNode={"gpu": 8}, env={"LR": "0.1", "BATCH": "32"})
    )
    # Act
    again = client.rerun(original.id, {"env": {"LR": "0.01"}, "hyperparameters": {"note": "rerun"}})
    # Assess
    assert again.id != original.id
    assert again.view["rerunOf"] == original.id
    assert again.idempotency_key and again.idempotency_key.startswith("gantry-py-") and not again.replayed
    view = client.get_run(again.id).view
    assert view["rerunOf"] == original.id
    assert view["links"]["rerunOf"] == f"/v1/runs/{original.id}"
    assert view["request"]["env"] == {"LR": "0.01", "BATCH": "32"}
    assert view["request"]["hyperparameters"] == {"note": "rerun"}
    assert view["request"]["numNodes"] == 2
    # The same key replays the same new run; Run.rerun without overrides is another plain one.
    replay = client.rerun(
        original.id, {"env": {"LR": "0.01"}, "hyperparameters": {"note": "rerun"}}, again.idempotency_key
    )
    assert replay.id == again.id and replay.replayed
    plain = original.rerun()
    assert plain.id not in (original.id, again.id)
    assert client.get_run(plain.id).view["request"]["env"] == {"LR": "0.1", "BATCH": "32"}
    for run in (original, again, plain):
        stop(run)


def test_a_bad_override_is_a_validation_error_naming_it(client: gantry.Client) -> None:
    original = client.submit_run(run_request("py-rerun-bad", numNodes=2, resourcesPerNode={"gpu": 8}))
    with pytest.raises(gantry.ValidationError) as err:
        client.rerun(original.id, {"numNodes": 0})
    assert [i.field for i in err.value.issues] == ["overrides.numNodes"]
    with pytest.raises(gantry.NotFoundError):
        client.rerun("run-aaaaaaaaaaaaaaaaaaaa")
    stop(original)


def test_list_sweeps_reads_summaries_with_counts(client: gantry.Client) -> None:
    sweep = client.submit_sweep(
        {
            "template": run_request("py-rerun-sweep"),
            "parameters": [{"name": "lr", "type": "continuous", "min": 0.0001, "max": 0.1, "scale": "log"}],
            "objective": {"metric": "accuracy", "direction": "maximize"},
            "algorithm": {"name": "random", "seed": 3},
            "maxTrials": 1,
        }
    )
    listed = {s.id: s for s in client.list_sweeps(page_size=1)}
    assert sweep.id in listed
    assert listed[sweep.id].view["modelName"] == "py-rerun-sweep"
    assert "trials" not in listed[sweep.id].view
    try:
        sweep.cancel()
    except gantry.SweepFinishedError:
        pass
