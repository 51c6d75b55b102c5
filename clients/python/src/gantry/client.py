"""The Gantry API client: runs, sweeps, validation, logs, metrics and events.

Views are the API's JSON as plain dicts (``GET /v1/openapi.json`` documents every field), so a
field the API adds is there without a new client release.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Union
from urllib.parse import quote, urlsplit

from . import _sigv4
from ._http import Auth, IamAuth, JwtAuth, LocalAuth, Transport, query_string
from ._logs import TailState, next_lines
from .errors import (
    GantryError,
    InternalError,
    MissingDependencyError,
    RunCancelledError,
    RunFailedError,
    RunLogsUnavailableError,
    ServiceUnavailable,
    SweepCancelledError,
    SweepFailedError,
    UnreachableError,
    WaitTimeout,
)

View = Dict[str, Any]
RequestLike = Union[Mapping[str, Any], str, "os.PathLike[str]"]

RUN_TERMINAL = ("Succeeded", "Failed", "Cancelled")
SWEEP_TERMINAL = ("Succeeded", "Failed", "Cancelled")
# The embedded default's demo team (cli/profiles.ts LOCAL_DEFAULT_PRINCIPAL).
LOCAL_DEFAULT_PRINCIPAL = "arn:aws:iam::000000000000:user/demo"


def load_request(request: RequestLike) -> Dict[str, Any]:
    """A request as a dict: a mapping as is, or a file: ``.json`` always, ``.yaml``/``.yml`` with PyYAML."""
    if isinstance(request, Mapping):
        return dict(request)
    path = Path(request)
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError as err:
            raise MissingDependencyError(
                f"{path} is YAML: reading it needs PyYAML (pip install pyyaml, or the [yaml] extra); "
                "a .json file needs nothing"
            ) from err
        doc = yaml.safe_load(text)
    else:
        try:
            doc = json.loads(text)
        except ValueError as err:
            raise ValueError(f"{path}: not valid JSON ({err}); YAML files must end in .yaml or .yml") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: the request must be an object (a mapping), got {type(doc).__name__}")
    return doc


def _is_loopback(endpoint: str) -> bool:
    host = urlsplit(endpoint).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


class Client:
    """A caller of the Gantry HTTP API.

    ``Client()`` calls ``npm run dev`` on ``http://127.0.0.1:${GANTRY_PORT:-8080}`` as the demo team.
    ``Client(endpoint, principal=ARN)`` names the local caller; ``auth="iam"`` signs with SigV4
    (credentials from the standard AWS chain through botocore, ``[iam]`` extra); ``token=JWT``
    sends a bearer token. ``GANTRY_ENDPOINT``, ``GANTRY_PRINCIPAL`` and ``GANTRY_TOKEN`` are read
    when the arguments are absent.
    """

    def __init__(
        self,
        endpoint: Optional[str] = None,
        *,
        principal: Optional[str] = None,
        auth: Optional[str] = None,
        token: Optional[str] = None,
        region: Optional[str] = None,
        aws_profile: Optional[str] = None,
        credentials: Optional[Callable[[], _sigv4.Credentials]] = None,
        timeout: float = 30.0,
        retries: int = 2,
    ) -> None:
        endpoint = endpoint or os.environ.get("GANTRY_ENDPOINT") or (
            f"http://127.0.0.1:{os.environ.get('GANTRY_PORT', '8080')}"
        )
        token = token or (os.environ.get("GANTRY_TOKEN") if auth in (None, "jwt") and not principal else None)
        if auth is None:
            if token:
                auth = "jwt"
            elif principal or _is_loopback(endpoint):
                auth = "local"
            elif _sigv4.region_of_endpoint(endpoint):
                auth = "iam"
            else:
                raise ValueError(
                    f"how should {endpoint} be called? pass principal=… (local), auth='iam' or token=…"
                )
        a: Auth
        if auth == "local":
            a = LocalAuth(principal or os.environ.get("GANTRY_PRINCIPAL") or LOCAL_DEFAULT_PRINCIPAL)
        elif auth == "jwt":
            if not token:
                raise ValueError("auth='jwt' needs token=… (or GANTRY_TOKEN)")
            a = JwtAuth(token)
        elif auth == "iam":
            reg = (
                region
                or _sigv4.region_of_endpoint(endpoint)
                or os.environ.get("AWS_REGION")
                or os.environ.get("AWS_DEFAULT_REGION")
            )
            if not reg:
                raise ValueError("auth='iam' needs a region: region=…, an execute-api endpoint, or AWS_REGION")
            a = IamAuth(reg, credentials or (lambda: _sigv4.credentials_from_botocore(aws_profile)))
            if credentials is None:
                # Fail at construction, not at the first call, when botocore is missing.
                try:
                    import botocore  # type: ignore[import-untyped]  # noqa: F401
                except ImportError as err:
                    raise MissingDependencyError(
                        "auth='iam' resolves AWS credentials with botocore: pip install botocore "
                        "(the package's [iam] extra: pip install './clients/python[iam]')"
                    ) from err
        else:
            raise ValueError(f"auth must be 'local', 'iam' or 'jwt', not {auth!r}")
        self.endpoint = endpoint.rstrip("/")
        self.auth = auth
        self._t = Transport(self.endpoint, a, timeout=timeout, retries=retries)

    def __repr__(self) -> str:
        return f"gantry.Client({self.endpoint!r}, auth={self.auth!r})"

    # -- plumbing --------------------------------------------------------------------------------

    def request(
        self, method: str, path: str, body: Any = None, headers: Optional[Mapping[str, str]] = None
    ) -> View:
        """One API call; the JSON body of a 2xx answer. Errors raise ``gantry.errors`` classes."""
        return self._t.call(method, path, body, headers)[1]

    # -- runs ------------------------------------------------------------------------------------

    def submit_run(self, request: RequestLike, idempotency_key: Optional[str] = None) -> "Run":
        """``POST /v1/runs``. Without a key one is made (``gantry-py-<uuid>``), so the call is safe to retry."""
        body = load_request(request)
        key = idempotency_key or body.get("idempotencyKey") or f"gantry-py-{uuid.uuid4()}"
        status, view, resp_headers = self._t.call("POST", "/v1/runs", body, {"Idempotency-Key": str(key)})
        run = Run(self, view["runId"], view)
        run.idempotency_key = str(key)
        run.replayed = status == 200
        # Past the soft threshold of the team's monthly GPU-hour budget: the warning, else None.
        run.budget_warning = resp_headers.get("gantry-budget-warning")
        return run

    def validate_run(self, request: RequestLike, idempotency_key: Optional[str] = None) -> View:
        """``POST /v1/runs/validate``, a dry run: ``{valid, runId?, checks: [{name, status, message}]}``.
        A request that breaks the schema or the tenancy rules raises as ``submit_run`` would
        (``ValidationError``, ``ForbiddenError``); the cluster's checks (runtime, quota) answer ``valid``."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return self.request("POST", "/v1/runs/validate", load_request(request), headers)

    def get_run(self, run_id: str) -> "Run":
        return Run(self, run_id, self.request("GET", f"/v1/runs/{_seg(run_id)}"))

    def run(self, run_id: str) -> "Run":
        """A handle on a run without reading it (``refresh()`` reads it)."""
        return Run(self, run_id, {"runId": run_id})

    def list_runs(
        self,
        *,
        phase: Optional[str] = None,
        sweep_id: Optional[str] = None,
        model: Optional[str] = None,
        since: Optional[str] = None,
        team: Optional[str] = None,
        page_size: Optional[int] = None,
    ) -> Iterator["Run"]:
        """The caller's runs, newest first, page after page (``GET /v1/runs``); each holds its summary."""
        params = {"phase": phase, "sweepId": sweep_id, "model": model, "since": since, "team": team}
        for item in self._pages("/v1/runs", "runs", params, page_size):
            yield Run(self, item["runId"], item)

    def cancel_run(self, run_id: str) -> View:
        return self.request("POST", f"/v1/runs/{_seg(run_id)}/cancel")

    def rerun(
        self,
        run_id: str,
        overrides: Optional[Mapping[str, Any]] = None,
        idempotency_key: Optional[str] = None,
    ) -> "Run":
        """``POST /v1/runs/{id}/rerun``: the run's request again as a new run, with ``overrides``
        merged in as a JSON merge patch (``{"env": {"LR": "0.01"}}`` changes one variable, ``None``
        removes a field). Without a key one is made, so the call is safe to retry; the new run's
        ``view["rerunOf"]`` is ``run_id``. A bad override raises ``ValidationError`` naming
        ``overrides.<field>``."""
        key = idempotency_key or f"gantry-py-{uuid.uuid4()}"
        body = {"overrides": dict(overrides)} if overrides else None
        status, view, _ = self._t.call(
            "POST", f"/v1/runs/{_seg(run_id)}/rerun", body, {"Idempotency-Key": str(key)}
        )
        run = Run(self, view["runId"], view)
        run.idempotency_key = str(key)
        run.replayed = status == 200
        return run

    # -- sweeps ----------------------------------------------------------------------------------

    def submit_sweep(self, request: RequestLike, idempotency_key: Optional[str] = None) -> "Sweep":
        body = load_request(request)
        key = idempotency_key or body.get("idempotencyKey") or f"gantry-py-{uuid.uuid4()}"
        status, view, _ = self._t.call("POST", "/v1/sweeps", body, {"Idempotency-Key": str(key)})
        sweep = Sweep(self, view["sweepId"], view)
        sweep.idempotency_key = str(key)
        sweep.replayed = status == 200
        return sweep

    def get_sweep(self, sweep_id: str) -> "Sweep":
        return Sweep(self, sweep_id, self.request("GET", f"/v1/sweeps/{_seg(sweep_id)}"))

    def list_sweeps(
        self,
        *,
        phase: Optional[str] = None,
        since: Optional[str] = None,
        team: Optional[str] = None,
        page_size: Optional[int] = None,
    ) -> Iterator["Sweep"]:
        params = {"phase": phase, "since": since, "team": team}
        for item in self._pages("/v1/sweeps", "sweeps", params, page_size):
            yield Sweep(self, item["sweepId"], item)

    # -- models ----------------------------------------------------------------------------------

    def list_models(self) -> List[View]:
        """``GET /v1/models``: the caller's teams' models (``name``, ``team``, ``latestVersion``, ``aliases``)."""
        return list(self.request("GET", "/v1/models").get("models", []))

    def get_model(self, name: str, limit: Optional[int] = None) -> View:
        """``GET /v1/models/{name}``: versions newest first (metrics, lineage), aliases with history
        and, for an alias a KServe InferenceService follows, ``serving`` (version, patched generation,
        ``ready`` True/False/Unknown with its reason)."""
        query = f"?limit={int(limit)}" if limit is not None else ""
        return self.request("GET", f"/v1/models/{_seg(name)}{query}")

    def get_model_version(self, name: str, version: int) -> View:
        """``GET /v1/models/{name}/versions/{version}``: the version's manifest and its aliases."""
        return self.request("GET", f"/v1/models/{_seg(name)}/versions/{int(version)}")

    def promote(
        self,
        name: str,
        version: int,
        alias: str = "production",
        expected_version: Any = ...,
        reason: Optional[str] = None,
    ) -> View:
        """Point ``alias`` at ``version`` (promote, approve a pending one, roll back). With
        ``expected_version`` (a version, or ``None`` for "points nowhere") the move happens only if
        the alias points there now, else ``ConflictError``. Returns the alias as moved."""
        body: Dict[str, Any] = {"version": int(version)}
        if expected_version is not ...:
            body["expectedVersion"] = expected_version
        if reason:
            body["reason"] = reason
        return self.request("POST", f"/v1/models/{_seg(name)}/aliases/{_seg(alias)}", body)["alias"]

    def rollback(self, name: str, alias: str = "production", to: Optional[int] = None) -> View:
        """Move ``alias`` back to its previous version (or ``to``), only if nobody moved it meanwhile."""
        current = next((a for a in self.get_model(name)["aliases"] if a["alias"] == alias), None)
        if current is None or current.get("version") is None:
            raise ValueError(f"{name} has no alias {alias} to roll back")
        target = to if to is not None else current.get("previousVersion")
        if target is None:
            raise ValueError(f"{alias} of {name} has no previous version; pass to=")
        return self.promote(
            name, target, alias, expected_version=current["version"],
            reason=f"rollback from version {current['version']}",
        )

    def runtimes(self) -> List[View]:
        """``GET /v1/runtimes``: the training runtimes the caller's teams may use."""
        return list(self.request("GET", "/v1/runtimes").get("runtimes", []))

    # -- usage ---------------------------------------------------------------------------------

    def usage(
        self, *, team: Optional[str] = None, model: Optional[str] = None, period: Optional[str] = None
    ) -> View:
        """``GET /v1/usage``: the team's (or one model's) used and lost GPU-hours of a UTC month
        (``period="2026-12"``, the default being the current month; ``days`` day by day) or day
        (``"2026-12-05"``), what it has in flight, and its monthly GPU-hour ``budget`` when it has one.
        A bad value raises ``ValidationError`` naming the field."""
        return self.request("GET", "/v1/usage" + query_string({"team": team, "model": model, "period": period}))

    def _pages(
        self, path: str, key: str, params: Mapping[str, Any], page_size: Optional[int]
    ) -> Iterator[View]:
        token: Optional[str] = None
        while True:
            q = {**params, "limit": page_size, "nextToken": token}
            page = self.request("GET", path + query_string(q))
            yield from page.get(key, [])
            token = page.get("nextToken")
            if not token:
                return


def _seg(s: str) -> str:
    return quote(s, safe="")


# How long wait() keeps polling through network errors and 5xx answers (as `gantry watch` does).
TRANSIENT_GRACE_SECONDS = 60.0


def _refresh_through_blips(refresh: Callable[[], Any], poll: float) -> None:
    """``refresh()``, retried through unreachable/5xx answers for up to TRANSIENT_GRACE_SECONDS."""
    first_failure: Optional[float] = None
    while True:
        try:
            refresh()
            return
        except (UnreachableError, ServiceUnavailable, InternalError):
            now = time.monotonic()
            first_failure = first_failure or now
            if now - first_failure >= TRANSIENT_GRACE_SECONDS:
                raise
            time.sleep(max(poll, 1.0))


class _Progress:
    """A tqdm bar over 0–100 % (``progress=True``), or nothing."""

    def __init__(self, enabled: bool, desc: str) -> None:
        self.bar: Any = None
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm  # type: ignore[import-untyped]
        except ImportError as err:
            raise MissingDependencyError(
                "progress=True draws a bar with tqdm: pip install tqdm (the [progress] extra)"
            ) from err
        self.bar = tqdm(total=100, desc=desc, unit="%", bar_format="{desc} {percentage:3.0f}%|{bar}|{postfix}")

    def update(self, percent: Optional[float], postfix: str) -> None:
        if self.bar is None:
            return
        if percent is not None:
            self.bar.n = max(0.0, min(100.0, float(percent)))
        self.bar.set_postfix_str(postfix, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Run:
    """A run: ``view`` is the last ``GET /v1/runs/{id}`` read (a list's summary until ``refresh()``)."""

    idempotency_key: Optional[str] = None
    replayed: bool = False
    #: The ``Gantry-Budget-Warning`` header of the submit that returned this run, if any.
    budget_warning: Optional[str] = None

    def __init__(self, client: Client, run_id: str, view: Optional[View] = None) -> None:
        self.client = client
        self.id = run_id
        self.view: View = dict(view or {"runId": run_id})

    def __repr__(self) -> str:
        return f"<gantry.Run {self.id} {self.phase}>"

    @property
    def phase(self) -> Optional[str]:
        """The phase as last read (``refresh()`` reads it again)."""
        return self.view.get("phase")

    @property
    def reason(self) -> Optional[str]:
        return self.view.get("reason")

    @property
    def progress(self) -> Optional[float]:
        p = self.view.get("progress") or {}
        return p.get("percent")

    @property
    def done(self) -> bool:
        return self.phase in RUN_TERMINAL

    def refresh(self) -> "Run":
        self.view = self.client.request("GET", f"/v1/runs/{_seg(self.id)}")
        return self

    def wait(
        self,
        timeout: Optional[float] = None,
        poll: float = 2.0,
        progress: bool = False,
        on_update: Optional[Callable[[View], None]] = None,
    ) -> View:
        """Poll until the run ends. Returns the final view when it ``Succeeded``; raises
        ``RunFailedError`` (with ``reason``) on ``Failed``, ``RunCancelledError`` on ``Cancelled``,
        ``WaitTimeout`` when ``timeout`` seconds pass first. Network errors and 5xx answers are
        polled through for a minute before they are raised."""
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = _Progress(progress, self.id)
        try:
            while True:
                _refresh_through_blips(self.refresh, poll)
                if on_update is not None:
                    on_update(self.view)
                metrics = self.view.get("metrics") or {}
                shown = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items())
                bar.update(self.progress, f"{self.phase} {shown}".strip())
                if self.done:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    raise WaitTimeout(f"run {self.id}", self.view, timeout or 0)
                time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))
        finally:
            bar.close()
        if self.phase == "Failed":
            raise RunFailedError(self.view)
        if self.phase == "Cancelled":
            raise RunCancelledError(self.view)
        return self.view

    def queue_position(self) -> View:
        """``GET /v1/runs/{id}/queue``: where the run waits in its Kueue LocalQueue while ``Pending``
        (``position``, ``ahead``, ``source``: ``"kueue"`` from Kueue's visibility API or ``"gantry"``
        from Gantry's view of the team's runs, ``message``), or ``queued: False``."""
        return self.client.request("GET", f"/v1/runs/{_seg(self.id)}/queue")

    def metrics(self) -> View:
        """``GET /v1/runs/{id}/metrics``: ``{runId, series: {name: [{t, v, s?}]}, progress?, lines, dropped}``
        (``t`` ISO time, ``v`` value, ``s`` the step when reported)."""
        return self.client.request("GET", f"/v1/runs/{_seg(self.id)}/metrics")

    def events(self) -> List[View]:
        """``GET /v1/runs/{id}/events``: the lifecycle events so far (CloudEvents envelopes), oldest first."""
        return list(self.client.request("GET", f"/v1/runs/{_seg(self.id)}/events").get("events", []))

    def rerun(self, overrides: Optional[Mapping[str, Any]] = None, idempotency_key: Optional[str] = None) -> "Run":
        """This run's request again as a new run (``Client.rerun``)."""
        return self.client.rerun(self.id, overrides, idempotency_key)

    def cancel(self) -> View:
        """``POST /v1/runs/{id}/cancel`` (202); ``RunFinishedError`` (409) when it already ended.

        The answer's ``phase`` is ``Cancelled`` once the run has no job, or ``Cancelling`` while its
        job still exists (its deletion failed and the reconciler retries it, then records
        ``Cancelled``). ``Cancelling`` is not an end: ``wait()`` keeps polling through it and raises
        ``RunCancelledError`` once the run is ``Cancelled``."""
        view = self.client.cancel_run(self.id)
        self.view.update({"phase": view.get("phase", self.phase)})
        return view

    def logs(
        self,
        node: int = 0,
        tail_lines: int = 100,
        follow: bool = False,
        poll: float = 1.0,
        attempt: Optional[int] = None,
    ) -> Union[List[str], Iterator[str]]:
        """The tail of node ``node``'s trainer log (``GET /v1/runs/{id}/logs``): live while the job
        exists, from the archive Gantry saved before deleting it once the run (or ``attempt``) ended.

        ``follow=True`` returns an iterator of new lines until the run ends (or its logs are gone),
        waiting while its pod is not there yet, as ``gantry logs -f`` does."""
        if not follow:
            return list(self.log_tail(node, tail_lines, attempt).get("lines", []))
        return self._follow(node, poll)

    def log_tail(self, node: int = 0, tail_lines: int = 100, attempt: Optional[int] = None) -> View:
        """The whole answer of ``GET /v1/runs/{id}/logs``: ``lines``, ``pod``, ``attempt``, and
        ``source`` (``live`` or ``archive``, with ``truncated`` and ``archivedAt``)."""
        return self._tail(node, tail_lines, attempt)

    def _tail(self, node: int, tail_lines: int, attempt: Optional[int] = None) -> View:
        q = query_string({"node": node, "tailLines": tail_lines, "attempt": attempt})
        return self.client.request("GET", f"/v1/runs/{_seg(self.id)}/logs{q}")

    def _follow(self, node: int, poll: float) -> Iterator[str]:
        state: Optional[TailState] = None
        seen_any = False
        ended = False
        while True:
            try:
                tail = self._tail(node, 1000)
            except RunLogsUnavailableError as err:
                # Not started yet: wait. Ended (its job deleted): nothing more to read.
                if ended or err.phase in RUN_TERMINAL or seen_any:
                    return
                time.sleep(poll)
                continue
            step = next_lines(state, tail.get("pod"), list(tail.get("lines", [])))
            state = step.state
            if step.gap:
                yield "… (lines missed while polling)"
            for line in step.fresh:
                seen_any = True
                yield line
            if ended:
                return
            # Once it ended, one more read for the lines written just before the end.
            ended = self.refresh().done
            if not ended:
                time.sleep(poll)


class Sweep:
    """A sweep: ``view`` is the last ``GET /v1/sweeps/{id}`` read (with its trials)."""

    idempotency_key: Optional[str] = None
    replayed: bool = False

    def __init__(self, client: Client, sweep_id: str, view: Optional[View] = None) -> None:
        self.client = client
        self.id = sweep_id
        self.view: View = dict(view or {"sweepId": sweep_id})

    def __repr__(self) -> str:
        return f"<gantry.Sweep {self.id} {self.phase}>"

    @property
    def phase(self) -> Optional[str]:
        return self.view.get("phase")

    @property
    def done(self) -> bool:
        return self.phase in SWEEP_TERMINAL

    @property
    def best(self) -> Optional[View]:
        """``{trialIndex, runId, objective, parameters}`` of the best trial so far, as last read."""
        return self.view.get("best")

    def best_run(self) -> Optional[Run]:
        b = self.best
        return self.client.get_run(b["runId"]) if b else None

    @property
    def objectives(self) -> Optional[List[View]]:
        """A multi-objective sweep's ``[{metric, direction}, …]`` (None for one objective)."""
        return self.view.get("objectives")

    @property
    def pareto_front(self) -> Optional[List[View]]:
        """A multi-objective sweep's Pareto front as last read: ``[{trialIndex, runId, values}]``, the
        succeeded trials no other dominates (``values`` by metric); None for one objective."""
        return self.view.get("paretoFront")

    def refresh(self) -> "Sweep":
        self.view = self.client.request("GET", f"/v1/sweeps/{_seg(self.id)}")
        return self

    def trials(self) -> List[View]:
        """Every trial (index, runId, parameters, phase, objective, …), read now."""
        return list(self.refresh().view.get("trials", []))

    def wait(self, timeout: Optional[float] = None, poll: float = 2.0, progress: bool = False) -> View:
        """Poll until the sweep ends; the final view on ``Succeeded``, ``SweepFailedError`` /
        ``SweepCancelledError`` otherwise, ``WaitTimeout`` past ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = _Progress(progress, self.id)
        try:
            while True:
                _refresh_through_blips(self.refresh, poll)
                planned = self.view.get("plannedTrials") or 0
                counts = self.view.get("counts") or {}
                ended = sum(v for k, v in counts.items() if k in ("Succeeded", "Failed", "EarlyStopped", "Cancelled"))
                best = self.best
                front = self.pareto_front
                shown = f"{self.phase} {ended}/{planned} trials" + (
                    f" Pareto front {len(front)}"
                    if front is not None
                    else f" best {best['objective']:.4g}"
                    if best and isinstance(best.get("objective"), (int, float))
                    else ""
                )
                bar.update(100.0 * ended / planned if planned else None, shown)
                if self.done:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    raise WaitTimeout(f"sweep {self.id}", self.view, timeout or 0)
                time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))
        finally:
            bar.close()
        if self.phase == "Failed":
            raise SweepFailedError(self.view)
        if self.phase == "Cancelled":
            raise SweepCancelledError(self.view)
        return self.view

    def cancel(self) -> View:
        self.view = self.client.request("POST", f"/v1/sweeps/{_seg(self.id)}/cancel")
        return self.view


__all__ = ["Client", "Run", "Sweep", "GantryError", "load_request"]
