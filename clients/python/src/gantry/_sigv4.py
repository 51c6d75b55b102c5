"""AWS Signature Version 4 for the deployed IAM API (service ``execute-api``), standard library only.

The canonical request follows botocore's ``SigV4Auth`` (non-S3): the path normalised and
URI-encoded once more, the query sorted by encoded key then value, the payload's SHA-256 signed,
``host`` and ``x-amz-date`` (and ``x-amz-security-token`` with session credentials) signed.
tests/test_sigv4.py checks it against botocore's own signer and AWS's published test vector.
Credentials come from botocore's standard chain (``gantry[iam]``); signing itself needs nothing.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple
from urllib.parse import quote, urlsplit


class Credentials(NamedTuple):
    access_key: str
    secret_key: str
    token: Optional[str] = None


def _normalize_path(path: str) -> str:
    """RFC 3986 dot-segment removal, consecutive slashes collapsed (botocore ``normalize_url_path``)."""
    if not path:
        return "/"
    out: List[str] = []
    for seg in path.split("/"):
        if seg and seg != ".":
            if seg == "..":
                if out:
                    out.pop()
            else:
                out.append(seg)
    first = "/" if path.startswith("/") else ""
    last = "/" if path.endswith("/") and out else ""
    return first + "/".join(out) + last


# Hop-by-hop and tracing headers a proxy may change: never signed (botocore's list).
_UNSIGNED = frozenset(
    """baggage connection expect keep-alive proxy-authenticate proxy-authorization te traceparent
    tracestate trailer transfer-encoding upgrade user-agent x-amzn-trace-id""".split()
)


def _canonical_query(query: str) -> str:
    if not query:
        return ""
    pairs: List[Tuple[str, str]] = []
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        pairs.append((key, value))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def _host_of(url: str) -> str:
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None and parts.port != default:
        return f"{host}:{parts.port}"
    return host


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def sign(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: Credentials,
    region: str,
    service: str = "execute-api",
    now: Optional[_dt.datetime] = None,
) -> Dict[str, str]:
    """The headers to send: ``headers`` plus ``X-Amz-Date``, the token and ``Authorization``.

    ``url`` must carry its query already encoded (``urllib.parse.urlencode`` with ``quote_via=quote``),
    exactly as it goes on the wire.
    """
    moment = (now or _dt.datetime.now(_dt.timezone.utc)).astimezone(_dt.timezone.utc)
    amz_date = moment.strftime("%Y%m%dT%H%M%SZ")
    date = amz_date[:8]
    out = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "x-amz-date")}
    out["X-Amz-Date"] = amz_date
    if credentials.token:
        out["X-Amz-Security-Token"] = credentials.token

    signed: Dict[str, str] = {}
    for name, value in out.items():
        if name.lower() not in _UNSIGNED:
            signed[name.lower()] = " ".join(str(value).split())
    signed.setdefault("host", _host_of(url))
    names = sorted(signed)
    canonical_headers = "".join(f"{n}:{signed[n]}\n" for n in names)
    signed_headers = ";".join(names)

    parts = urlsplit(url)
    canonical_request = "\n".join(
        [
            method.upper(),
            quote(_normalize_path(parts.path), safe="/~"),
            _canonical_query(parts.query),
            canonical_headers,
            signed_headers,
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical_request.encode("utf-8")).hexdigest()]
    )
    key = _hmac(_hmac(_hmac(_hmac(("AWS4" + credentials.secret_key).encode("utf-8"), date), region), service), "aws4_request")
    signature = hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    out["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
        f"SignedHeaders={signed_headers}, Signature={signature}"
    )
    return out


def credentials_from_botocore(profile: Optional[str] = None) -> Credentials:
    """The standard AWS credential chain (env, shared config and SSO, process, container and instance roles)."""
    try:
        import botocore.session  # type: ignore[import-untyped]
    except ImportError as err:
        from .errors import MissingDependencyError

        raise MissingDependencyError(
            "auth='iam' resolves AWS credentials with botocore: pip install botocore "
            "(the package's [iam] extra: pip install './clients/python[iam]')"
        ) from err
    session = botocore.session.Session(profile=profile)
    creds = session.get_credentials()
    if creds is None:
        from .errors import UnreachableError

        raise UnreachableError("no AWS credentials found (environment, shared config, SSO, or an instance role)")
    frozen = creds.get_frozen_credentials()
    return Credentials(frozen.access_key, frozen.secret_key, frozen.token)


def region_of_endpoint(endpoint: str) -> Optional[str]:
    """The region of an API Gateway endpoint (``<id>.execute-api.<region>.amazonaws.com``)."""
    host = urlsplit(endpoint).hostname or ""
    marker = ".execute-api."
    if marker in host and (host.endswith(".amazonaws.com") or host.endswith(".amazonaws.com.cn")):
        return host.split(marker, 1)[1].split(".", 1)[0]
    return None
