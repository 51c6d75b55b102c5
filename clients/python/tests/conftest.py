"""Fixtures: the embedded default (tests/stack.ts) started once for the session on 127.0.0.1 and
stopped at the end, and clients of it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

import gantry

ROOT = Path(__file__).resolve().parents[3]
HARNESS = Path(__file__).with_name("stack.ts")
DEMO = "arn:aws:iam::000000000000:user/demo"
STRANGER = "arn:aws:iam::000000000000:user/nobody"


def _node() -> str:
    """Node 24 as the project runs it: GANTRY_NODE, the `node` dev dependency, else node on PATH."""
    for candidate in (os.environ.get("GANTRY_NODE"), str(ROOT / "node_modules" / ".bin" / "node"), shutil.which("node")):
        if candidate and os.path.exists(candidate):
            return candidate
    pytest.fail("node is required to start the embedded default (run `npm ci` at the repository root)")


@pytest.fixture(scope="session")
def stack() -> Iterator[Dict[str, Any]]:
    if not (ROOT / "node_modules").exists():
        pytest.fail(f"{ROOT}/node_modules is missing: run `npm ci` at the repository root first")
    tmp = Path(tempfile.mkdtemp(prefix="gantry-py-stack-"))
    out, log_path = tmp / "stack.json", tmp / "stack.log"
    log = open(log_path, "wb")
    env = {**os.environ, "GANTRY_LOG_LEVEL": os.environ.get("GANTRY_LOG_LEVEL", "warn")}
    proc = subprocess.Popen(
        [_node(), str(HARNESS), str(out), os.environ.get("GANTRY_PY_SIM_SPEED", "300")],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not (out.exists() and out.stat().st_size > 0):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the embedded default did not start:\n{log_path.read_text()[-4000:]}")
            time.sleep(0.2)
        yield json.loads(out.read_text())
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def client(stack: Dict[str, Any]) -> gantry.Client:
    return gantry.Client(stack["api"], principal=DEMO)


@pytest.fixture(scope="session")
def stranger(stack: Dict[str, Any]) -> gantry.Client:
    return gantry.Client(stack["api"], principal=STRANGER)


def run_request(model: str = "py-client", **extra: Any) -> Dict[str, Any]:
    """A small run of the demo team on the simulator."""
    return {
        "modelName": model,
        "team": "demo",
        "runtime": {"name": "torch-distributed"},
        "image": "registry.local/vision/train:1.0",
        "numNodes": 1,
        "resourcesPerNode": {"gpu": 1},
        "queue": "demo-queue",
        **extra,
    }


def wait_for(what: str, check: Any, timeout: float = 60.0, every: float = 0.2) -> Any:
    end = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


def trainer_env(stack: Dict[str, Any], run: gantry.Run) -> Dict[str, str]:
    """The env the run's training container got: read from its TrainJob on the cluster simulator."""
    ns = run.refresh().view["namespace"]
    job = run.view.get("job", {}).get("name", run.id)
    url = f"{stack['sim']}/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{job}"
    with urllib.request.urlopen(url, timeout=10) as res:
        obj = json.loads(res.read())
    return {e["name"]: e.get("value", "") for e in obj["spec"]["trainer"]["env"]}


def stop(run: gantry.Run) -> None:
    """Cancel a run the test no longer needs (frees the queue's GPUs); one that already ended is fine."""
    try:
        run.cancel()
    except gantry.RunFinishedError:
        pass
