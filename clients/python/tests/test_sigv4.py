"""SigV4: AWS's published test vector, botocore's own signer on fixed inputs, and a request as the
client sends it over the wire, verified again with botocore from what a server received."""

from __future__ import annotations

import datetime as dt
import http.server
import json
import threading
from typing import Any, Dict, List, Optional

import pytest

import gantry
from gantry._sigv4 import Credentials, region_of_endpoint, sign

botocore_auth = pytest.importorskip("botocore.auth")
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.credentials import Credentials as BotoCredentials  # noqa: E402

AKID = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
T = dt.datetime(2015, 8, 30, 12, 36, 0, tzinfo=dt.timezone.utc)


def test_aws_get_vanilla_vector() -> None:
    # aws-sig-v4-test-suite/get-vanilla: GET / on example.amazonaws.com, service "service", us-east-1.
    headers = sign("GET", "https://example.amazonaws.com/", {}, b"", Credentials(AKID, SECRET), "us-east-1", "service", T)
    assert headers["X-Amz-Date"] == "20150830T123600Z"
    assert headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders=host;x-amz-date, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    )


def botocore_sign(
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    url: str,
    headers: Dict[str, str],
    body: bytes,
    creds: Credentials,
    region: str,
    at: dt.datetime,
    service: str = "execute-api",
) -> Dict[str, str]:
    monkeypatch.setattr(botocore_auth, "get_current_datetime", lambda *a, **k: at.replace(tzinfo=None))
    req = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    botocore_auth.SigV4Auth(BotoCredentials(creds.access_key, creds.secret_key, creds.token), service, region).add_auth(req)
    return dict(req.headers.items())


CASES: List[Dict[str, Any]] = [
    {"method": "GET", "url": "https://abc123.execute-api.eu-west-1.amazonaws.com/v1/runs/run-abc", "body": b""},
    {
        "method": "GET",
        "url": "https://abc123.execute-api.eu-west-1.amazonaws.com/v1/runs?since=2026-01-01T00%3A00%3A00Z&phase=Running&limit=5",
        "body": b"",
    },
    {
        "method": "POST",
        "url": "https://abc123.execute-api.eu-west-1.amazonaws.com/v1/runs:validate",
        "body": json.dumps({"modelName": "m", "env": {"A": "b c"}}).encode(),
        "headers": {"Content-Type": "application/json", "Idempotency-Key": "k-1", "User-Agent": "x/1"},
    },
    {
        "method": "POST",
        "url": "http://127.0.0.1:8123/v1/runs/run-abc/cancel",
        "body": b"",
        "token": "FQoGZXIvYXdzEJr//////////session",
    },
    {"method": "GET", "url": "https://gantry.example.com/v1/runs?team=a%20b&model=x%2Fy", "body": b""},
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['method']} {c['url'][-40:]}")
def test_matches_botocore(case: Dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    creds = Credentials(AKID, SECRET, case.get("token"))
    headers = {"Accept": "application/json", **case.get("headers", {})}
    ours = sign(case["method"], case["url"], headers, case["body"], creds, "eu-west-1", "execute-api", T)
    theirs = botocore_sign(monkeypatch, case["method"], case["url"], headers, case["body"], creds, "eu-west-1", T)
    assert ours["Authorization"] == theirs["Authorization"]
    assert ours["X-Amz-Date"] == theirs["X-Amz-Date"]
    assert ours.get("X-Amz-Security-Token") == theirs.get("X-Amz-Security-Token")


class _Capture(http.server.BaseHTTPRequestHandler):
    seen: List[Dict[str, Any]] = []

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        _Capture.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers.items()), "body": body})
        payload = json.dumps({"runId": "run-abc", "phase": "Accepted", "links": {}}).encode()
        self.send_response(202 if self.command == "POST" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = _handle
    do_POST = _handle

    def log_message(self, *args: Any) -> None:
        pass


def test_the_request_on_the_wire_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_port}"
        creds = Credentials(AKID, SECRET, "session-token")
        client = gantry.Client(endpoint, auth="iam", region="eu-west-1", credentials=lambda: creds)
        _Capture.seen.clear()
        client.submit_run({"modelName": "m", "args": ["--lr=0.1"]}, idempotency_key="k-9")
        list(client.list_runs(phase="Running", since="2026-01-01T00:00:00Z", page_size=2))
        assert len(_Capture.seen) == 2
        for got in _Capture.seen:
            h = {k.lower(): v for k, v in got["headers"].items()}
            at = dt.datetime.strptime(h["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
            # What API Gateway does: sign again what it received, with the headers the client signed.
            signed_names = h["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
            received = {n: h[n] for n in signed_names if n not in ("x-amz-date", "x-amz-security-token")}
            expected = botocore_sign(monkeypatch, got["method"], endpoint + got["path"], received, got["body"], creds, "eu-west-1", at)
            assert h["authorization"] == expected["Authorization"]
            assert "x-gantry-principal" not in h
    finally:
        server.shutdown()


def test_region_of_endpoint() -> None:
    assert region_of_endpoint("https://abc.execute-api.eu-west-1.amazonaws.com") == "eu-west-1"
    assert region_of_endpoint("https://abc.execute-api.cn-north-1.amazonaws.com.cn/") == "cn-north-1"
    assert region_of_endpoint("https://gantry.example.com") is None
    client: Optional[gantry.Client] = gantry.Client(
        "https://abc.execute-api.eu-west-1.amazonaws.com", credentials=lambda: Credentials("a", "b")
    )
    assert client is not None and client.auth == "iam"
