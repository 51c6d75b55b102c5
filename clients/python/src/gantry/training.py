"""For training code running inside a Gantry job.

* ``report(step=…, metrics={…}, progress=…)`` — the metric channel: lines are buffered and written
  as JSON Lines objects under ``GANTRY_METRICS_URI``, at most one object every
  ``flush_seconds`` (30 s by default, the README's advice), when the buffer nears the channel's
  limits, on ``flush()`` and when the process exits.
* ``save_checkpoint(step, data)`` / ``latest_checkpoint()`` — under ``GANTRY_CHECKPOINT_URI``:
  the checkpoint first, then a small ``latest`` pointer to it (the README's contract), so a
  process killed between the two leaves the previous checkpoint in force.
* ``attempt()`` / ``is_resumed()`` — whether this process continues an earlier one.

S3 is reached with boto3 (``pip install boto3``; the package's ``[s3]`` extra), which takes its
endpoint from ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` and credentials from the pod's
service account (IRSA, EKS Pod Identity) as usual.
"""

from __future__ import annotations

import atexit
import datetime as _dt
import json
import math
import numbers
import os
import re
import socket
import sys
import threading
import time
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple
from urllib.parse import urlsplit

from .errors import MissingDependencyError

# lib/trainjob/labels.ts ENV.
METRICS_URI_ENV = "GANTRY_METRICS_URI"
CHECKPOINT_URI_ENV = "GANTRY_CHECKPOINT_URI"
RUN_ID_ENV = "GANTRY_RUN_ID"
# Not set by Gantry today; honoured first should it be (see attempt()).
ATTEMPT_ENV = "GANTRY_ATTEMPT"

# lib/metrics/channel.ts: metric names, the object suffix and the limits of one object.
METRIC_NAME = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")
METRIC_OBJECT_SUFFIX = ".jsonl"
MAX_OBJECT_BYTES = 256 * 1024
MAX_LINES = 1000
# Leave room under the channel's limits: an object over them is not read at all.
_FLUSH_BYTES = 192 * 1024
_FLUSH_LINES = 900


class Report(NamedTuple):
    """One reported line, validated, before it is encoded."""

    time: _dt.datetime
    step: Optional[int]
    metrics: Dict[str, float]
    progress: Optional[float]
    eta_seconds: Optional[float]


def metric_object(metrics_uri: str, reports: List[Report], writer: str, seq: int, now_ns: int) -> Tuple[str, str, bytes]:
    """(bucket, key, body) of one metric object: THE place that encodes the channel's format.

    Key: ``<GANTRY_METRICS_URI prefix><20-digit ns time>-<writer>-<seq>.jsonl`` (keys sort in the
    order they are written; the channel reads any ``runs/<run id>/metrics/<name>.jsonl``).
    Body: one JSON object per line with ``time`` (ISO 8601 with offset), ``step``, ``metrics``,
    ``progressPercentage``, ``estimatedRemainingSeconds`` (lib/metrics/channel.ts).
    """
    bucket, prefix = split_s3_uri(metrics_uri, METRICS_URI_ENV)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    key = f"{prefix}{now_ns:020d}-{writer}-{seq:04d}{METRIC_OBJECT_SUFFIX}"
    lines = []
    for r in reports:
        line: Dict[str, Any] = {"time": r.time.isoformat()}
        if r.step is not None:
            line["step"] = r.step
        if r.metrics:
            line["metrics"] = r.metrics
        if r.progress is not None:
            line["progressPercentage"] = r.progress
        if r.eta_seconds is not None:
            line["estimatedRemainingSeconds"] = r.eta_seconds
        lines.append(json.dumps(line, separators=(",", ":"), allow_nan=False))
    return bucket, key, ("\n".join(lines) + "\n").encode("utf-8")


def split_s3_uri(uri: str, what: str = "URI") -> Tuple[str, str]:
    """(bucket, key prefix) of ``s3://bucket/prefix``."""
    parts = urlsplit(uri)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError(f"{what} must be an s3://bucket/prefix/ URI, got {uri!r}")
    return parts.netloc, parts.path.lstrip("/")


def _env_uri(name: str) -> str:
    uri = os.environ.get(name)
    if not uri:
        raise RuntimeError(f"{name} is not set: Gantry sets it in the job's training container")
    return uri


def metrics_uri() -> str:
    """``GANTRY_METRICS_URI``: ``s3://<gantry bucket>/runs/<run id>/metrics/``."""
    return _env_uri(METRICS_URI_ENV)


def checkpoint_uri() -> str:
    """``GANTRY_CHECKPOINT_URI``: ``s3://<gantry bucket>/runs/<run id>/checkpoints/``, the same for every attempt."""
    return _env_uri(CHECKPOINT_URI_ENV)


def s3_client() -> Any:
    """A boto3 S3 client (endpoint and credentials as boto3 resolves them), or a clear error."""
    try:
        import boto3  # type: ignore[import-untyped]
    except ImportError as err:
        raise MissingDependencyError(
            "gantry.training writes to S3 with boto3: pip install boto3 "
            "(the package's [s3] extra: pip install './clients/python[s3]')"
        ) from err
    return boto3.client("s3")


def _check_number(field: str, v: Any, low: Optional[float] = None, high: Optional[float] = None) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        try:
            v = float(v)  # numpy and torch scalars
        except (TypeError, ValueError):
            raise ValueError(f"{field}: must be a number, got {type(v).__name__}") from None
    if not math.isfinite(v):
        raise ValueError(f"{field}: must be a finite number, got {v}")
    if low is not None and v < low:
        raise ValueError(f"{field}: must be >= {low:g}, got {v}")
    if high is not None and v > high:
        raise ValueError(f"{field}: must be <= {high:g}, got {v}")
    return float(v)


def _writer_id() -> str:
    host = os.environ.get("HOSTNAME") or socket.gethostname() or "node"
    return re.sub(r"[^A-Za-z0-9_.-]", "-", host)[:63] + f"-{os.getpid()}"


class Reporter:
    """Buffers reports and writes them as metric objects. ``gantry.training.report`` uses one per process."""

    def __init__(
        self,
        uri: Optional[str] = None,
        *,
        s3: Any = None,
        flush_seconds: float = 30.0,
        max_lines: int = _FLUSH_LINES,
        max_bytes: int = _FLUSH_BYTES,
    ) -> None:
        self._uri = uri
        self._s3 = s3
        self.flush_seconds = flush_seconds
        self.max_lines = min(max_lines, MAX_LINES)
        self.max_bytes = min(max_bytes, MAX_OBJECT_BYTES)
        self._buffer: List[Report] = []
        self._bytes = 0
        self._last_flush: Optional[float] = None
        self._seq = 0
        self._writer = _writer_id()
        self._lock = threading.Lock()
        self.objects_written = 0

    @property
    def uri(self) -> str:
        if self._uri is None:
            self._uri = metrics_uri()
        return self._uri

    def report(
        self,
        step: Optional[int] = None,
        metrics: Optional[Mapping[str, Any]] = None,
        progress: Optional[float] = None,
        eta_seconds: Optional[float] = None,
        *,
        at: Optional[_dt.datetime] = None,
        flush: bool = False,
    ) -> None:
        """Queue one line. Bad input raises ``ValueError`` naming the field and the rule: the channel
        would drop the line silently."""
        r = self._validate(step, metrics, progress, eta_seconds, at)
        self.uri  # noqa: B018 - fail at the first report, not at exit, when the env is missing
        size = len(metric_object(self.uri, [r], self._writer, 0, 0)[2])
        with self._lock:
            if self._buffer and (len(self._buffer) + 1 > self.max_lines or self._bytes + size > self.max_bytes):
                self._flush_locked()
            self._buffer.append(r)
            self._bytes += size
            now = time.monotonic()
            # The first report goes out at once: the run shows it is reporting (stall detection).
            due = self._last_flush is None or now - self._last_flush >= self.flush_seconds
            if flush or due:
                self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._buffer:
            return
        if self._s3 is None:
            self._s3 = s3_client()
        self._seq += 1
        bucket, key, body = metric_object(self.uri, self._buffer, self._writer, self._seq, time.time_ns())
        self._s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/x-ndjson")
        self._buffer = []
        self._bytes = 0
        self._last_flush = time.monotonic()
        self.objects_written += 1

    @staticmethod
    def _validate(
        step: Optional[int],
        metrics: Optional[Mapping[str, Any]],
        progress: Optional[float],
        eta_seconds: Optional[float],
        at: Optional[_dt.datetime],
    ) -> Report:
        if step is not None and (
            isinstance(step, bool) or not isinstance(step, numbers.Integral) or int(step) < 0
        ):
            raise ValueError(f"step: must be an integer >= 0, got {step!r}")
        vals: Dict[str, float] = {}
        for name, v in (metrics or {}).items():
            if not isinstance(name, str) or not METRIC_NAME.match(name):
                raise ValueError(f"metrics.{name}: metric names are 1-128 of A-Z a-z 0-9 _ . : / -")
            vals[name] = _check_number(f"metrics.{name}", v)
        p = None if progress is None else _check_number("progress", progress, 0, 100)
        eta = None if eta_seconds is None else _check_number("eta_seconds", eta_seconds, 0)
        if not vals and p is None and eta is None:
            raise ValueError("report: a line must carry metrics or progress")
        t = at or _dt.datetime.now(_dt.timezone.utc)
        if t.tzinfo is None:
            raise ValueError("at: must carry a time zone (e.g. datetime.now(timezone.utc))")
        return Report(t, None if step is None else int(step), vals, p, eta)


_default: Optional[Reporter] = None
_default_lock = threading.Lock()


def _reporter() -> Reporter:
    global _default
    with _default_lock:
        if _default is None:
            _default = Reporter()
            atexit.register(_flush_at_exit)
        return _default


def _flush_at_exit() -> None:
    if _default is None:
        return
    try:
        _default.flush()
    except Exception as err:  # noqa: BLE001 - at exit, say so and let the process end
        print(f"gantry.training: could not write the last metric lines: {err}", file=sys.stderr)


def report(
    step: Optional[int] = None,
    metrics: Optional[Mapping[str, Any]] = None,
    progress: Optional[float] = None,
    eta_seconds: Optional[float] = None,
    *,
    flush: bool = False,
) -> None:
    """Report metrics and/or progress (0–100 %) at ``step``. Cheap to call every step: lines are
    buffered and written at most every 30 s (the first at once), and at exit. Call it from one
    process (rank 0)."""
    _reporter().report(step, metrics, progress, eta_seconds, flush=flush)


def flush() -> None:
    """Write the buffered lines now (e.g. before a long evaluation)."""
    if _default is not None:
        _default.flush()


# -- checkpoints -------------------------------------------------------------------------------

LATEST = "latest"
_STEP_KEY = re.compile(r"step-(\d+)")


class Checkpoint(NamedTuple):
    step: int
    key: str
    data: bytes


class CheckpointStore:
    """put/get bytes under ``GANTRY_CHECKPOINT_URI`` (the README's S3Store)."""

    def __init__(self, uri: Optional[str] = None, s3: Any = None) -> None:
        self.bucket, self.prefix = split_s3_uri(uri or checkpoint_uri(), CHECKPOINT_URI_ENV)
        if self.prefix and not self.prefix.endswith("/"):
            self.prefix += "/"
        self._s3 = s3

    @property
    def s3(self) -> Any:
        if self._s3 is None:
            self._s3 = s3_client()
        return self._s3

    def put(self, key: str, body: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=body)

    def get(self, key: str) -> Optional[bytes]:
        try:
            return bytes(self.s3.get_object(Bucket=self.bucket, Key=self.prefix + key)["Body"].read())
        except Exception as err:  # noqa: BLE001 - botocore's NoSuchKey comes in several shapes
            code = getattr(err, "response", {}).get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404", "NotFound"):
                return None
            raise

    def save(self, step: int, data: bytes, suffix: str = ".ckpt") -> str:
        """The checkpoint first, then the pointer to it: a crash in between keeps the previous one."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step: must be an integer >= 0, got {step!r}")
        key = f"step-{step:012d}{suffix}"
        self.put(key, data)
        self.put(LATEST, key.encode("utf-8"))
        return key

    def latest(self) -> Optional[Checkpoint]:
        """The checkpoint ``latest`` points to, or None (the first attempt)."""
        pointer = self.get(LATEST)
        if pointer is None:
            return None
        key = pointer.decode("utf-8").strip()
        data = self.get(key)
        if data is None:
            raise RuntimeError(f"{LATEST} points to {key}, which is missing under {self.bucket}/{self.prefix}")
        m = _STEP_KEY.search(key)
        return Checkpoint(int(m.group(1)) if m else 0, key, data)


def save_checkpoint(step: int, data: bytes, suffix: str = ".ckpt") -> str:
    """Save ``data`` as the checkpoint of ``step`` and point ``latest`` at it; returns its key."""
    return CheckpointStore().save(step, data, suffix)


def latest_checkpoint() -> Optional[Checkpoint]:
    """``Checkpoint(step, key, data)`` of the newest saved checkpoint, or None."""
    return CheckpointStore().latest()


def attempt() -> int:
    """The attempt this job is (1, 2, …). Gantry names attempt N's job ``<run id>-a<N>`` and a pod's
    name starts with its job's, so it is read from ``HOSTNAME`` (``GANTRY_ATTEMPT`` wins if set)."""
    explicit = os.environ.get(ATTEMPT_ENV, "")
    if explicit.isdigit():
        return int(explicit)
    run_id = os.environ.get(RUN_ID_ENV, "")
    host = os.environ.get("HOSTNAME", "")
    if run_id and host.startswith(run_id + "-a"):
        m = re.match(r"(\d+)(-|$)", host[len(run_id) + 2 :])
        if m:
            return int(m.group(1))
    return 1


def is_resumed(store: Optional[CheckpointStore] = None) -> bool:
    """True when this process continues earlier work: a later attempt, or a checkpoint is there
    (a pod replaced within the same attempt resumes too)."""
    if attempt() > 1:
        return True
    return (store or CheckpointStore()).get(LATEST) is not None


__all__ = [
    "report",
    "flush",
    "Reporter",
    "metric_object",
    "metrics_uri",
    "checkpoint_uri",
    "save_checkpoint",
    "latest_checkpoint",
    "CheckpointStore",
    "Checkpoint",
    "attempt",
    "is_resumed",
]
