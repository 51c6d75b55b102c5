"""gantry.training: the metric object format, and reports written through it into a running run's
GANTRY_METRICS_URI on the local S3 that the API then shows; checkpoints; attempts."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import textwrap
from typing import Any, Dict

import pytest

import gantry
from conftest import run_request, stop, trainer_env, wait_for
from gantry import training

URI = "s3://gantry-local/runs/run-abcdefghijklmnopqrst/metrics/"


def local_s3_env(stack: Dict[str, Any]) -> Dict[str, str]:
    """What boto3 needs to reach the local S3 (as a pod gets its endpoint and credentials)."""
    return {
        "AWS_ENDPOINT_URL_S3": stack["s3"],
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def test_metric_object_format() -> None:
    t = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    reports = [
        training.Report(t, 10, {"loss": 0.5, "val/acc": 0.8}, 25.0, 600.0),
        training.Report(t, None, {}, 30.0, None),
    ]
    bucket, key, body = training.metric_object(URI, reports, "trainer-node-0-12", 3, 1_700_000_000_000_000_000)
    assert bucket == "gantry-local"
    # lib/metrics/channel.ts reads runs/<run id>/metrics/<name>.jsonl
    assert re.fullmatch(r"runs/run-[a-z2-7]{20}/metrics/[^/]+\.jsonl", key)
    assert key == "runs/run-abcdefghijklmnopqrst/metrics/01700000000000000000-trainer-node-0-12-0003.jsonl"
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert lines == [
        {
            "time": "2026-01-02T03:04:05+00:00",
            "step": 10,
            "metrics": {"loss": 0.5, "val/acc": 0.8},
            "progressPercentage": 25.0,
            "estimatedRemainingSeconds": 600.0,
        },
        {"time": "2026-01-02T03:04:05+00:00", "progressPercentage": 30.0},
    ]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"step": -1, "metrics": {"loss": 1}}, "step: must be an integer >= 0"),
        ({"step": 1.5, "metrics": {"loss": 1}}, "step: must be an integer >= 0"),
        ({"metrics": {"bad name": 1}}, "metrics.bad name: metric names are 1-128"),
        ({"metrics": {"loss": float("nan")}}, "metrics.loss: must be a finite number"),
        ({"metrics": {"loss": "high"}}, "metrics.loss: must be a number"),
        ({"progress": 101}, "progress: must be <= 100"),
        ({"eta_seconds": -1, "progress": 1}, "eta_seconds: must be >= 0"),
        ({"step": 3}, "a line must carry metrics or progress"),
    ],
)
def test_bad_reports_name_the_field_and_rule(kwargs: Dict[str, Any], message: str) -> None:
    r = training.Reporter(URI, s3=object())
    with pytest.raises(ValueError, match=re.escape(message)):
        r.report(**kwargs)


class _Recorder:
    def __init__(self) -> None:
        self.puts: list = []

    def put_object(self, **kw: Any) -> None:
        self.puts.append(kw)


def test_batching_by_time_and_size() -> None:
    s3 = _Recorder()
    r = training.Reporter(URI, s3=s3, flush_seconds=3600, max_lines=5)
    r.report(step=0, metrics={"loss": 1.0})  # the first line goes out at once
    assert len(s3.puts) == 1
    for i in range(1, 8):
        r.report(step=i, metrics={"loss": 1.0 / (i + 1)})
    # Lines 1–5 filled one object; 6 and 7 wait for the next flush.
    assert [len(p["Body"].splitlines()) for p in s3.puts] == [1, 5]
    r.flush()
    assert [len(p["Body"].splitlines()) for p in s3.puts] == [1, 5, 2]
    keys = [p["Key"] for p in s3.puts]
    assert keys == sorted(keys) and len(set(keys)) == 3


def test_missing_boto3_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(gantry.MissingDependencyError, match=r"pip install boto3.*\[s3\]"):
        training.Reporter(URI).report(step=1, metrics={"loss": 1})


def test_missing_env_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GANTRY_METRICS_URI", raising=False)
    with pytest.raises(RuntimeError, match="GANTRY_METRICS_URI is not set"):
        training.Reporter().report(step=1, metrics={"loss": 1})


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"GANTRY_RUN_ID": "run-abcdefghijklmnopqrst", "HOSTNAME": "run-abcdefghijklmnopqrst-node-0-0-x7k2p"}, 1),
        ({"GANTRY_RUN_ID": "run-abcdefghijklmnopqrst", "HOSTNAME": "run-abcdefghijklmnopqrst-a3-node-0-0-x7k2p"}, 3),
        ({"GANTRY_RUN_ID": "run-abcdefghijklmnopqrst", "HOSTNAME": "run-abcdefghijklmnopqrst-a2-master-0"}, 2),
        ({"HOSTNAME": "laptop"}, 1),
        ({"GANTRY_ATTEMPT": "4", "HOSTNAME": "x"}, 4),
    ],
)
def test_attempt(env: Dict[str, str], expected: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GANTRY_RUN_ID", "HOSTNAME", "GANTRY_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert training.attempt() == expected


def test_reports_reach_the_runs_metric_history(stack: Dict[str, Any], client: gantry.Client) -> None:
    # Prepare: a run, trained by the simulator; the test is its training code's rank 0.
    run = client.submit_run(run_request("py-training"))
    wait_for("the run to train", lambda: run.refresh().phase in ("Running", "Publishing", "Succeeded"), 60, 0.1)
    env = trainer_env(stack, run)
    assert env["GANTRY_METRICS_URI"].startswith("s3://")
    # Act: a training script as a user writes it; the last lines go out when it exits (atexit).
    script = textwrap.dedent(
        """
        from gantry import training
        for step in range(0, 50, 10):
            training.report(step=step, metrics={"py_loss": 1.0 / (step + 1), "py_acc": step / 100}, progress=step)
        print(training._reporter().objects_written)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, **local_s3_env(stack), "GANTRY_METRICS_URI": env["GANTRY_METRICS_URI"], "HOSTNAME": "trainer-node-0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    # Only the first line went out before exit (30 s batching); the other four at exit.
    assert done.stdout.strip() == "1"
    # Assess: the API serves every point, in the history's shape, with its step.
    history = wait_for(
        "the reported points",
        lambda: (h := run.metrics()) and len(h["series"].get("py_loss", [])) == 5 and h,
        30,
    )
    assert [p["s"] for p in history["series"]["py_loss"]] == [0, 10, 20, 30, 40]
    assert [p["v"] for p in history["series"]["py_acc"]] == [0.0, 0.1, 0.2, 0.3, 0.4]
    assert history["series"]["py_loss"][0]["v"] == 1.0


def test_checkpoints_under_the_runs_checkpoint_uri(
    stack: Dict[str, Any], client: gantry.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("boto3")
    run = client.submit_run(run_request("py-checkpoint"))
    uri = wait_for("the checkpoint URI", lambda: run.refresh().view.get("checkpointUri"), 30, 0.1)
    stop(run)
    for k, v in local_s3_env(stack).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("GANTRY_CHECKPOINT_URI", uri)
    monkeypatch.setenv("GANTRY_RUN_ID", run.id)
    monkeypatch.setenv("HOSTNAME", f"{run.id}-node-0-0-abcde")
    assert training.checkpoint_uri() == uri
    # The first attempt finds nothing.
    assert training.latest_checkpoint() is None and not training.is_resumed()
    training.save_checkpoint(5, b"weights at 5")
    training.save_checkpoint(10, b"weights at 10")
    latest = training.latest_checkpoint()
    assert latest == training.Checkpoint(10, "step-000000000010.ckpt", b"weights at 10")
    assert training.is_resumed()
    # A checkpoint written by the README's snippet (JSON under step-N.json, then `latest`) reads too.
    store = training.CheckpointStore()
    store.put("step-000000000020.json", json.dumps({"step": 20, "state": {"w": 1}}).encode())
    store.put("latest", b"step-000000000020.json")
    assert training.latest_checkpoint().step == 20  # type: ignore[union-attr]
