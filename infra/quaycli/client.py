"""A small client of the room API (standard library only), against any base URL: ``quay dev`` on
127.0.0.1 or a deployed stage. Used by the ``quay`` client commands and the tests.

Every POST carries an ``Idempotency-Key`` (a fresh one per call unless given): a POST retried
after a dropped connection is sent again with the same key, so it never writes twice.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlencode
from urllib.request import HTTPRedirectHandler, Request, build_opener

DEFAULT_URL = "http://127.0.0.1:8787"


@dataclass
class ApiResponse:
    status: int
    headers: dict[str, str]
    body: Any  # parsed JSON, or the text when not JSON
    text: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


@dataclass
class ApiError(Exception):
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        if 300 <= self.status < 400:  # never followed (it would carry the token elsewhere)
            location = {k.lower(): v for k, v in self.headers.items()}.get("location")
            return f"HTTP {self.status}: the API answered with a redirect to {location!r}, not followed"
        if isinstance(self.body, dict):
            message = self.body.get("message") or self.body.get("Message") or self.body.get("error")
            return f"HTTP {self.status}: {message}"
        return f"HTTP {self.status}: {self.body}"


def _seg(value: str) -> str:
    return quote(str(value), safe=":")


class _NeverFollow(HTTPRedirectHandler):
    """A 3xx is the answer (an :class:`ApiError` from the named methods), never followed: a
    redirect would carry the ``Authorization`` header to another host, and turn a POST into a GET."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = build_opener(_NeverFollow)


class QuayClient:
    """``QuayClient(base_url, token)``; :meth:`request` returns any response, the named methods
    raise :class:`ApiError` on a 3xx (never followed), 4xx or 5xx."""

    def __init__(
        self, base_url: str = DEFAULT_URL, token: str | None = None, *, timeout_s: float = 30.0, retries: int = 2
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.retries = retries

    # ------------------------------------------------------------------ transport
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        headers: dict[str, str] | None = None,
        raw_body: bytes | None = None,
    ) -> ApiResponse:
        url = self.base_url + path
        if query:
            url += "?" + urlencode({k: v for k, v in query.items() if v is not None})
        hdrs = {"Accept": "application/json", **(headers or {})}
        if self.token:
            hdrs.setdefault("Authorization", f"Bearer {self.token}")
        data = raw_body
        if data is None and body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        if method.upper() == "POST":
            hdrs.setdefault("Idempotency-Key", idempotency_key or str(uuid.uuid4()))
        attempt = 0
        while True:
            req = Request(url, data=data, method=method.upper(), headers=hdrs)
            try:
                with _OPENER.open(req, timeout=self.timeout_s) as resp:
                    return self._response(resp.status, dict(resp.headers.items()), resp.read())
            except HTTPError as exc:
                return self._response(exc.code, dict(exc.headers.items()) if exc.headers else {}, exc.read())
            except (URLError, ConnectionError, TimeoutError):
                # safe to repeat: GETs read, POSTs carry the same Idempotency-Key
                attempt += 1
                if attempt > self.retries:
                    raise
                time.sleep(0.2 * attempt)

    @staticmethod
    def _response(status: int, headers: dict[str, str], raw: bytes) -> ApiResponse:
        text = raw.decode("utf-8", "replace")
        try:
            body: Any = json.loads(text) if text else None
        except ValueError:
            body = text
        return ApiResponse(status, headers, body, text)

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        resp = self.request(method, path, body, **kwargs)
        if not resp.ok:
            raise ApiError(resp.status, resp.body, resp.headers)
        return resp.body

    # ------------------------------------------------------------------ operator
    def create_company(self, company: str, people: list[str] | None = None) -> dict:
        return self.call("POST", "/companies", {"id": company, "people": people or []})

    def set_max_concurrent_runs(self, company: str, value: int) -> dict:
        """``PATCH /companies/{company}``: its runs active at once (docs/design.md §12.3)."""
        return self.call("PATCH", f"/companies/{_seg(company)}", {"max_concurrent_runs": value})

    def add_person(self, company: str, person: str) -> dict:
        return self.call("POST", f"/companies/{_seg(company)}/people", {"person": person})

    def issue_token(self, company: str, member: str) -> dict:
        return self.call("POST", f"/companies/{_seg(company)}/tokens", {"member": member})

    def revoke_token(self, company: str, token_id: str) -> dict:
        return self.call("DELETE", f"/companies/{_seg(company)}/tokens/{_seg(token_id)}")

    def tokens(self, company: str) -> list[dict]:
        """``GET /companies/{company}/tokens``: its tokens' ids and metadata (never a token)."""
        return self.call("GET", f"/companies/{_seg(company)}/tokens")["tokens"]

    def audit(self, company: str, limit: int = 50) -> list[dict]:
        """``GET /companies/{company}/audit``: its audit trail, newest first (docs/design.md §5)."""
        return self.call("GET", f"/companies/{_seg(company)}/audit", query={"limit": limit})["entries"]

    # ------------------------------------------------------------------ company
    def me(self) -> dict:
        """``GET /me``: who the token is, ``{company, member, admin}``."""
        result: dict = self.call("GET", "/me")
        return result

    def policy(self, company: str) -> dict:
        return self.call("GET", f"/companies/{_seg(company)}/policy")

    def set_policy(self, company: str, policy: dict) -> dict:
        return self.call("PUT", f"/companies/{_seg(company)}/policy", policy)

    def register_agent(
        self,
        name: str,
        provider: str,
        model: str,
        *,
        instructions: str = "",
        api_key: str | None = None,
        base_url: str | None = None,
        wake_from: str | None = None,
        max_context_tokens: int | None = None,
        role_arn: str | None = None,
    ) -> dict:
        """Register your company's agent ``name``; its id is ``{company}.{name}``. ``role_arn``: a
        bedrock agent's company role instead of a key (the answer's ``external_id`` goes in the
        role's trust policy; docs/design.md §5)."""
        body: dict[str, Any] = {"name": name, "provider": provider, "model": model, "instructions": instructions}
        if wake_from is not None:
            body["wake_from"] = wake_from
        if max_context_tokens is not None:
            body["max_context_tokens"] = max_context_tokens
        if api_key is not None:
            body["api_key"] = api_key
        if base_url is not None:
            body["base_url"] = base_url
        if role_arn is not None:
            body["role_arn"] = role_arn
        return self.call("POST", "/agents", body)

    def agents(self) -> list[dict]:
        """Your company's agents."""
        return self.call("GET", "/agents")["agents"]

    def budget(self, company: str) -> dict:
        """``GET /companies/{company}/budget`` (design §12.4)."""
        result: dict = self.call("GET", f"/companies/{_seg(company)}/budget")
        return result

    def set_budget(self, company: str, budget: dict) -> dict:
        """``PUT /companies/{company}/budget``: replaces the company's budget."""
        result: dict = self.call("PUT", f"/companies/{_seg(company)}/budget", budget)
        return result

    def spend(self, company: str, period: str = "day") -> dict:
        """``GET /companies/{company}/spend?period=day|month``."""
        result: dict = self.call("GET", f"/companies/{_seg(company)}/spend", query={"period": period})
        return result

    def pause_agent(self, agent: str) -> dict:
        """Pause your company's agent (its name or id): no run of it starts until it is resumed."""
        return self.call("POST", f"/agents/{_seg(agent)}/pause")

    def stop_chain(self, room: str, chain: str) -> dict:
        """Stop a chain of agent wakes in a room: no further run of it starts."""
        return self.call("POST", f"/rooms/{_seg(room)}/chains/{_seg(chain)}/stop")

    def update_agent(self, agent: str, **changes: Any) -> dict:
        """``PATCH /agents/{agent}``: change your company's agent (model, instructions, wake_from,
        max_context_tokens, api_key); a change left ``None`` is not sent."""
        return self.call("PATCH", f"/agents/{_seg(agent)}", {k: v for k, v in changes.items() if v is not None})

    def delete_agent(self, agent: str) -> dict:
        """``DELETE /agents/{agent}``: delete your company's agent for good (its past runs stay)."""
        return self.call("DELETE", f"/agents/{_seg(agent)}")

    def resume_agent(self, agent: str) -> dict:
        """Resume your company's paused agent."""
        return self.call("POST", f"/agents/{_seg(agent)}/resume")

    # ------------------------------------------------------------------ rooms
    def every(self, path: str, field: str, query: dict[str, Any] | None = None, limit: int = 200) -> list[Any]:
        """Every item of a paged listing (docs/api.md, paging): page after page of ``limit``,
        following ``next_cursor`` until a page has none."""
        out: list[Any] = []
        cursor = None
        while True:
            page = self.call("GET", path, query={**(query or {}), "limit": limit, "cursor": cursor})
            out += page[field]
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def rooms(self) -> list[str]:
        """The ids of the rooms your company is a member of (every page)."""
        return self.every("/rooms", "rooms")

    def create_room(
        self,
        name: str | None = None,
        members: list[str] | None = None,
        *,
        hop_limit: int | None = None,
        max_runs_per_chain: int | None = None,
    ) -> dict:
        """Create a room; the service generates its id (the answer's ``id``), ``name`` is a label."""
        body: dict[str, Any] = {"members": members or []}
        if name is not None:
            body["name"] = name
        if hop_limit is not None:
            body["hop_limit"] = hop_limit
        if max_runs_per_chain is not None:
            body["max_runs_per_chain"] = max_runs_per_chain
        return self.call("POST", "/rooms", body)

    def room(self, room: str) -> dict:
        return self.call("GET", f"/rooms/{_seg(room)}")

    def add_member(self, room: str, company: str) -> dict:
        """Invite a company to a room (docs/design.md §5): ``{room_id, company, invited_by,
        invited_at, status: "invited"}``; it is a member once a person of it accepts."""
        return self.call("POST", f"/rooms/{_seg(room)}/members", {"company": company})

    def invitations(self) -> list[dict]:
        """Your company's pending room invitations (``room_id``, ``company``, ``invited_by``,
        ``invited_at``)."""
        return list(self.call("GET", "/invitations")["invitations"])

    def accept(self, room: str) -> dict:
        """Accept your company's invitation to a room: the room, your company a member."""
        return self.call("POST", f"/rooms/{_seg(room)}/invitations/accept")

    def decline(self, room: str) -> dict:
        """Decline your company's invitation to a room: ``{room_id, declined}``."""
        return self.call("POST", f"/rooms/{_seg(room)}/invitations/decline")

    def leave(self, room: str) -> dict:
        """Your company leaves a room: ``{room_id, left}``."""
        return self.call("POST", f"/rooms/{_seg(room)}/leave")

    def add_agent(self, room: str, agent: str) -> dict:
        return self.call("POST", f"/rooms/{_seg(room)}/agents", {"agent": agent})

    def post(self, room: str, text: str, to: list[str] | None = None, *, idempotency_key: str | None = None) -> dict:
        return self.call(
            "POST", f"/rooms/{_seg(room)}/messages", {"text": text, "to": to or []}, idempotency_key=idempotency_key
        )

    def messages(self, room: str, *, limit: int = 50, cursor: str | None = None, order: str = "asc") -> dict:
        return self.call(
            "GET", f"/rooms/{_seg(room)}/messages", query={"limit": limit, "cursor": cursor, "order": order}
        )

    def transcript(self, room: str) -> list[dict]:
        """Every message of the room, oldest first (all pages)."""
        out: list[dict] = []
        cursor = None
        while True:
            page = self.messages(room, limit=200, cursor=cursor)
            out += page["messages"]
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def task(self, room: str, to: str, title: str, body: str = "") -> dict:
        return self.call("POST", f"/rooms/{_seg(room)}/tasks", {"to": to, "title": title, "body": body})

    def tasks(self, room: str, status: str = "open") -> list[dict]:
        """The room's tasks of ``status``, oldest first (every page)."""
        return self.every(f"/rooms/{_seg(room)}/tasks", "tasks", {"status": status})

    def update_task(self, room: str, task: str, note: str) -> dict:
        return self.call("POST", f"/rooms/{_seg(room)}/tasks/{_seg(task)}/updates", {"note": note})

    def close_task(self, room: str, task: str, result: str = "") -> dict:
        return self.call("POST", f"/rooms/{_seg(room)}/tasks/{_seg(task)}/close", {"result": result})

    def memory(self, room: str) -> list[dict]:
        """The memory lines your company may read, newest first (every page)."""
        return self.every(f"/rooms/{_seg(room)}/memory", "lines")

    def remember(self, room: str, text: str, visibility: str) -> dict:
        return self.call("POST", f"/rooms/{_seg(room)}/memory", {"text": text, "visibility": visibility})

    def approvals(self, room: str, status: str = "pending") -> list[dict]:
        """Your company's agents' approval requests of ``status``, oldest first (every page)."""
        return self.every(f"/rooms/{_seg(room)}/approvals", "approvals", {"status": status})

    def approve(self, room: str, approval_id: str) -> dict:
        return self.call("POST", f"/rooms/{_seg(room)}/approvals/{_seg(approval_id)}/approve")

    def deny(self, room: str, approval_id: str) -> dict:
        return self.call("POST", f"/rooms/{_seg(room)}/approvals/{_seg(approval_id)}/deny")

    def runs(self, room: str, limit: int = 50) -> list[dict]:
        return self.run_list(room, limit)["runs"]

    def run_list(self, room: str, limit: int = 50, cursor: str | None = None) -> dict:
        """A page of ``GET /rooms/{room}/runs``: ``{"runs": [...], "not_started": [...],
        "next_cursor": ...}`` (newest first)."""
        result: dict = self.call("GET", f"/rooms/{_seg(room)}/runs", query={"limit": limit, "cursor": cursor})
        return result

    def all_runs(self, room: str) -> dict:
        """Every page of ``GET /rooms/{room}/runs``, joined: ``{"runs": [...], "not_started": [...]}``."""
        out: dict[str, list] = {"runs": [], "not_started": []}
        cursor = None
        while True:
            page = self.run_list(room, 200, cursor)
            out["runs"] += page["runs"]
            out["not_started"] += page.get("not_started", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def run(self, run_id: str) -> dict:
        return self.call("GET", f"/runs/{_seg(run_id)}")

    def replay(self, run_id: str) -> dict:
        """``GET /runs/{run}/replay``: the run's actions decided then and now (docs/design.md §5)."""
        return self.call("GET", f"/runs/{_seg(run_id)}/replay")

    def room_cost(self, room: str, day: str | None = None) -> dict:
        """Your company's model spend in ``room`` on UTC ``day`` (``YYYY-MM-DD``; today when
        ``None``) and in its month: ``GET /rooms/{room}/cost``."""
        return self.call("GET", f"/rooms/{_seg(room)}/cost", query={"day": day} if day else None)

    # ------------------------------------------------------------------ files
    def add_file(self, room: str, name: str, content_type: str, size: int) -> dict:
        """Declare an upload: ``{"file": ..., "upload": {"url", "fields", "expires_in", "max_bytes"}}``."""
        return self.call(
            "POST", f"/rooms/{_seg(room)}/files", {"name": name, "content_type": content_type, "size": size}
        )

    def files(self, room: str) -> list[dict]:
        """The room's files (every page)."""
        return self.every(f"/rooms/{_seg(room)}/files", "files")

    def file(self, room: str, file_id: str) -> dict:
        return self.call("GET", f"/rooms/{_seg(room)}/files/{_seg(file_id)}")

    def delete_file(self, room: str, file_id: str) -> dict:
        return self.call("DELETE", f"/rooms/{_seg(room)}/files/{_seg(file_id)}")


def upload_form(
    url: str, fields: dict[str, str], data: bytes, *, filename: str, content_type: str, timeout_s: float = 120.0
) -> ApiResponse:
    """POST ``data`` to a presigned S3 POST ``url`` as multipart/form-data: the signed ``fields``
    first, the file last (S3 ignores fields after it). No Authorization header (the signature is
    in the fields), no redirect followed; the answer, whatever its status."""
    from urllib.request import HTTPRedirectHandler, build_opener

    class _NoRedirect(HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            return None  # a 3xx from the upload URL is its answer, never followed

    boundary = "quay-" + uuid.uuid4().hex
    safe_name = filename.replace('"', "_").replace("\r", "_").replace("\n", "_")
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{safe_name}"\r\n'
        f"Content-Type: {content_type}\r\n\r\n".encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    req = Request(
        url, data=b"".join(parts), method="POST", headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )
    try:
        with build_opener(_NoRedirect).open(req, timeout=timeout_s) as resp:
            return QuayClient._response(resp.status, dict(resp.headers.items()), resp.read())
    except HTTPError as exc:
        return QuayClient._response(exc.code, dict(exc.headers.items()) if exc.headers else {}, exc.read())
