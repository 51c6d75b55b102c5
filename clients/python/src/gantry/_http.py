"""The HTTP transport: JSON in and out over urllib, the target's auth on every call.

Auth, as the TypeScript CLI does it (cli/client.ts): ``local`` sends the caller's IAM principal in
``x-gantry-principal`` (the embedded default reads the identity from it; no authentication),
``iam`` signs with SigV4 (service ``execute-api``), ``jwt`` sends ``Authorization: Bearer``.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, Mapping, Optional, Tuple
from urllib.parse import quote, urlencode

from ._version import __version__
from ._sigv4 import Credentials, sign
from .errors import UnreachableError, error_for

# local/http-api.ts PRINCIPAL_HEADER.
PRINCIPAL_HEADER = "x-gantry-principal"
# Statuses worth another try: the API's 503 (with Retry-After) and a gateway's 502/504.
_RETRY_STATUS = (502, 503, 504)


class Auth:
    """How a request proves who sends it."""

    def apply(self, method: str, url: str, headers: Dict[str, str], body: bytes) -> Dict[str, str]:
        return headers


class LocalAuth(Auth):
    """The embedded default: the principal in a header, no authentication (local only)."""

    def __init__(self, principal: str) -> None:
        self.principal = principal

    def apply(self, method: str, url: str, headers: Dict[str, str], body: bytes) -> Dict[str, str]:
        return {**headers, PRINCIPAL_HEADER: self.principal}


class JwtAuth(Auth):
    def __init__(self, token: str) -> None:
        self.token = token

    def apply(self, method: str, url: str, headers: Dict[str, str], body: bytes) -> Dict[str, str]:
        return {**headers, "Authorization": f"Bearer {self.token}"}


class IamAuth(Auth):
    """SigV4 with credentials from ``credentials()`` (botocore's chain unless given), resolved per call."""

    def __init__(self, region: str, credentials: Callable[[], Credentials]) -> None:
        self.region = region
        self.credentials = credentials

    def apply(self, method: str, url: str, headers: Dict[str, str], body: bytes) -> Dict[str, str]:
        try:
            creds = self.credentials()
        except Exception as err:  # noqa: BLE001 - any failure to get credentials means "cannot sign"
            if isinstance(err, ImportError):
                raise
            raise UnreachableError(f"cannot sign the request: {err}") from err
        return sign(method, url, headers, body, creds, self.region)


def query_string(params: Mapping[str, Any]) -> str:
    """``?a=1&b=x`` of the parameters that are set, percent-encoded as SigV4 expects (spaces as %20)."""
    items = [(k, str(v)) for k, v in params.items() if v is not None]
    return "?" + urlencode(items, quote_via=quote, safe="-_.~") if items else ""


class Transport:
    def __init__(self, endpoint: str, auth: Auth, timeout: float = 30.0, retries: int = 2) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.auth = auth
        self.timeout = timeout
        self.retries = retries

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> Tuple[int, Dict[str, Any], Dict[str, str]]:
        """(status, JSON body, response headers) of a 2xx answer; an ApiError for 4xx/5xx."""
        url = self.endpoint + path
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        base: Dict[str, str] = {"Accept": "application/json", "User-Agent": f"gantry-python/{__version__}"}
        if body is not None:
            base["Content-Type"] = "application/json"
        base.update(headers or {})
        attempt = 0
        while True:
            attempt += 1
            # Signed again on every try: the signature carries the time.
            sent = self.auth.apply(method, url, dict(base), data)
            req = urllib.request.Request(url, data=data if body is not None else None, method=method, headers=sent)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as res:
                    return res.status, _json_of(res.read()), {k.lower(): v for k, v in res.headers.items()}
            except urllib.error.HTTPError as err:
                status = err.code
                parsed = _json_of(err.read())
                retry_after = err.headers.get("retry-after") if err.headers else None
                if status in _RETRY_STATUS and attempt <= self.retries:
                    time.sleep(_backoff(attempt, retry_after))
                    continue
                raise error_for(status, parsed, method, path, retry_after) from None
            except (urllib.error.URLError, OSError) as err:
                if attempt <= self.retries:
                    time.sleep(_backoff(attempt, None))
                    continue
                reason = getattr(err, "reason", err)
                raise UnreachableError(f"cannot reach {self.endpoint} ({method} {path}): {reason}") from None


def _backoff(attempt: int, retry_after: Optional[str]) -> float:
    if retry_after and retry_after.isdigit():
        return min(float(retry_after), 10.0)
    return min(0.5 * 2.0 ** (attempt - 1), 5.0)


def _json_of(raw: bytes) -> Dict[str, Any]:
    if not raw:
        return {}
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return {"message": raw[:500].decode("utf-8", "replace")}
    return parsed if isinstance(parsed, dict) else {"value": parsed}
