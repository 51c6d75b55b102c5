"""Run.wait() polls through network errors and 5xx answers for a while, as `gantry watch` does,
then gives up with the error."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any, Iterator, List

import pytest

import gantry
from gantry import client as client_module


class _Flaky(http.server.BaseHTTPRequestHandler):
    failures_left = 0
    requests: List[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        _Flaky.requests.append(self.path)
        if _Flaky.failures_left != 0:
            _Flaky.failures_left -= 1
            body = json.dumps({"error": "ServiceUnavailable", "message": "retry later", "requestId": "r"}).encode()
            self.send_response(503)
            self.send_header("Retry-After", "0")
        else:
            body = json.dumps({"runId": "run-abc", "phase": "Succeeded", "metrics": {"loss": 0.1}}).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def flaky() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Flaky.requests = []
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_wait_polls_through_503s(flaky: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module.time, "sleep", lambda s: None)
    _Flaky.failures_left = 7  # more than the transport's own two retries
    final = gantry.Client(flaky, principal="p").run("run-abc").wait(poll=0.01)
    assert final["phase"] == "Succeeded"
    assert len(_Flaky.requests) == 8


def test_wait_gives_up_after_the_grace(flaky: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "TRANSIENT_GRACE_SECONDS", 0.3)
    _Flaky.failures_left = -1  # always
    with pytest.raises(gantry.ServiceUnavailable) as err:
        gantry.Client(flaky, principal="p", retries=0).run("run-abc").wait(poll=0.05)
    assert err.value.request_id == "r"
