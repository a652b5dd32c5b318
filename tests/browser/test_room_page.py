"""The room page in a real browser (issue 12, design §9): headless Chromium from the distribution's
packages, driven by Playwright for Python, against a real ``quay dev`` process (scripted a1 holds a
memory write for acme's yes; b1 answers with echo replies).

The walk: a wrong token is refused in plain words; sign in; post ``@b1`` (picked from the @mention
list with the keyboard) and see b1's reply appear without a reload; a message
``<img src=x onerror=alert(1)>`` stays text; a1's held action shows in the transcript and in
Approvals; approve it; the memory line appears; one run's timeline; a text file uploaded from
the files panel is listed and becomes ready; no horizontal overflow at 375 px; screenshots at 1440
and 375 px; sign out clears the token. No ``securitypolicyviolation`` event fires and the token
never appears in a URL.

The stop switch (design §12.2), in a second room: ann pauses and resumes her company's a2 with the
Agents panel's button (the API reads it back paused, then not; the room shows each notice), bolt's
b2 has no button; a message for the paused a2 says under it that a2 did not wake, and why;
ann stops a chain from the runs view while a2's delayed reply is under way (the
room shows the stop notice, the API holds the chain stopped, and a3, whom a2's reply names, never
runs in it, while it does in an earlier chain). An error the API answers is shown in its words.

A failed run (a5, in a third room): its notice offers Ask again, which wakes a5 again; the line
under the transcript says a5 is working while its slow reply runs; replies and notices link to
their run for the run's company's people only.

Without chromium (or Playwright) the test skips with a message, except under ``CI=true``, where it
fails. ``.ci/run`` installs ``chromium`` and ``chromium-driver`` with apt when it runs as root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quaycli.client import QuayClient
from quaydev import quay_dev, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("QUAY_TEST_ARTIFACTS", REPO_ROOT / "tests" / "artifacts"))
ADMIN = "qyt_admin_browser_test_0001"
HELD = "launch on the 12th"
XSS = "<img src=x onerror=alert(1)>"
#: a2's reply, held back ``STOP_DELAY_S`` the second time: long enough to stop its chain meanwhile
STOP_DELAY_S = 15
#: a5's second answer, held back long enough for a poll to see it working
SLOW_REPLY_S = 8
SCRIPTS = {
    "a1": [
        {
            "reply": {
                "text": "Will remember once acme agrees.",
                "actions": [{"kind": "remember", "text": HELD, "visibility": "company"}],
            }
        }
    ],
    "a2": [
        {"reply": {"text": "Over to @a3 for the stalls."}},
        {"delay_s": STOP_DELAY_S, "reply": {"text": "Over to @a3 for the quay."}},
    ],
    # fails once (its notice offers Ask again), then answers slowly (the page shows it working)
    "a5": [
        {
            "error": {
                "status": 400,
                "headers": {},
                "body": {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}},
            }
        },
        {"delay_s": SLOW_REPLY_S, "reply": {"text": "Back with the plan: stalls first."}},
    ],
    # a4's first request is refused with a retry-after of 1 s: its run waits, then its retry answers
    "a4": [
        {
            "error": {
                "status": 429,
                "headers": {"retry-after": "1"},
                "body": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
            }
        },
        {"reply": {"text": "Tide tables sent."}},
    ],
}
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
WAIT_MS = 60_000
EXPECT_MS = 20_000


def _chromium() -> str | None:
    for candidate in (os.environ.get("QUAY_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _browser_or_skip() -> str:
    problems = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append("Playwright for Python is not installed (make install: the dev extras)")
    chromium = _chromium()
    if chromium is None:
        problems.append("no chromium executable (Debian: apt-get install -y chromium chromium-driver)")
    if problems:
        message = "browser tests need " + "; ".join(problems)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: not skipped)")
        pytest.skip(message)
    assert chromium is not None
    return chromium


@pytest.fixture(scope="module")
def chromium() -> str:
    path = _browser_or_skip()
    from playwright.sync_api import expect

    # Playwright's expect waits 5 s by default: the page's polls answer later than that on a loaded
    # 2-core machine (CI once saw the runs view's list 5 s after the message's note).
    expect.set_options(timeout=EXPECT_MS)
    return path


@pytest.fixture(scope="module")
def dev_url(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``quay dev`` on a free port with a1 scripted (as tests/api/test_api_dev_server.py)."""
    tmp = tmp_path_factory.mktemp("quay-dev-browser")
    scripts = tmp / "scripts.json"
    scripts.write_text(json.dumps(SCRIPTS))
    with quay_dev(tmp, "--scripts", str(scripts), admin_token=ADMIN) as url:
        yield url


@pytest.fixture(scope="module")
def room(dev_url: str) -> dict[str, str]:
    admin = QuayClient(dev_url, ADMIN)
    admin.create_company("acme", ["ann"])
    admin.create_company("bolt", ["bob"])
    ann = QuayClient(dev_url, admin.issue_token("acme", "ann")["token"])
    bob = QuayClient(dev_url, admin.issue_token("bolt", "bob")["token"])
    ann.set_policy("acme", {"actions": {"remember": "ask"}})
    room_id = ann.create_room("harbour", ["bolt"])["id"]
    bob.accept(room_id)  # bolt is invited (design §5): bob accepts
    ann.register_agent("a1", "anthropic", "claude-local", api_key="sk-acme-local", instructions="Be brief.")
    bob.register_agent("b1", "openai", "gpt-local", api_key="sk-bolt-local")
    ann.add_agent(room_id, "a1")
    bob.add_agent(room_id, "b1")
    return {"room": room_id, "ann": ann.token, "bob": bob.token}


@pytest.fixture(scope="module")
def locks(dev_url: str, room: dict[str, str]) -> dict[str, str]:
    """A second room of acme and bolt (the companies of ``room``): acme's a2 (scripted) and a3
    (echoes), bolt's b2."""
    ann, bob = QuayClient(dev_url, room["ann"]), QuayClient(dev_url, room["bob"])
    room_id = ann.create_room("locks", ["bolt"])["id"]
    bob.accept(room_id)  # bolt is invited (design §5): bob accepts
    for name in ("a2", "a3"):
        ann.register_agent(name, "anthropic", "claude-local")
        ann.add_agent(room_id, name)
    bob.register_agent("b2", "openai", "gpt-local")
    bob.add_agent(room_id, "b2")
    return {"room": room_id, "ann": room["ann"], "bob": room["bob"]}


def _open_room(page: Any, dev_url: str, token: str, room_id: str, name: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{dev_url}/app/")
    page.get_by_label("Your bearer token").fill(token)
    page.keyboard.press("Enter")
    page.locator(f"#room-list button[data-room='{room_id}']").click()
    expect(page.locator("#room-title")).to_have_text(name)


def _refuse_once(page: Any, pattern: str, status: int, message: str) -> list[str]:
    """Answer the next request to ``pattern`` with ``status`` and the API's JSON error body (the
    server never sees it); returns the list the refused URLs are added to."""
    refused: list[str] = []

    def answer(route: Any) -> None:
        refused.append(route.request.url)
        route.fulfill(
            status=status, content_type="application/json", body=json.dumps({"error": "x", "message": message})
        )
        page.unroute(pattern, answer)

    page.route(pattern, answer)
    return refused


def _notices(client: QuayClient, room_id: str) -> list[str]:
    return [m["text"] for m in client.transcript(room_id) if m["kind"] == "notice"]


def test_room_page_in_headless_chromium(chromium: str, dev_url: str, room: dict[str, str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    token = room["ann"]
    requested: list[str] = []
    dialogs: list[str] = []
    console_errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            # Runs before the page's own script: every CSP violation of the page is kept.
            context.add_init_script(
                "window.__csp = [];"
                "document.addEventListener('securitypolicyviolation', e => window.__csp.push("
                "e.violatedDirective + ' ' + e.blockedURI));"
            )
            page = context.new_page()
            page.set_default_timeout(WAIT_MS)
            page.on("request", lambda r: requested.append(r.url))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)

            response = page.goto(f"{dev_url}/app/")
            assert response is not None and response.status == 200
            csp = response.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp
            page.evaluate("window.__loaded = 'once'")  # gone if the page ever reloads

            # a wrong token: refused in plain words, nothing kept
            page.get_by_label("Your bearer token").fill("qyt_wrong_token_000000000000")
            page.get_by_role("button", name="Sign in").click()
            expect(page.locator("#error")).to_contain_text("not accepted")
            assert page.evaluate("sessionStorage.length") == 0

            # sign in, open the room
            page.get_by_label("Your bearer token").fill(token)
            page.keyboard.press("Enter")
            room_button = page.locator(f"#room-list button[data-room='{room['room']}']")
            expect(room_button).to_contain_text("harbour")
            expect(page.locator("#error")).to_be_hidden()
            room_button.click()
            expect(page.locator("#room-title")).to_have_text("harbour")

            # @mention completion from the keyboard, then post; b1's reply appears without reload
            box = page.get_by_label("Message (type @ to mention an agent)")
            box.focus()
            page.keyboard.type("@b")
            expect(page.locator("#mention-list")).to_be_visible()
            expect(page.locator("#mention-list [role=option]")).to_have_text(["@b1"])
            page.keyboard.press("Enter")
            assert box.input_value() == "@b1 "
            page.keyboard.type("where do the stalls go?")
            page.keyboard.press("Control+Enter")
            expect(page.locator("#transcript .msg.message").filter(has_text="where do the stalls go?")).to_have_count(1)
            expect(page.locator("#transcript .msg.reply").filter(has_text="b1")).to_contain_text(
                "echo:", timeout=WAIT_MS
            )

            # untrusted text stays text
            box.fill(XSS)
            page.get_by_role("button", name="Post", exact=True).click()
            xss = page.locator("#transcript .msg .text").filter(has_text=XSS)
            expect(xss).to_have_text(XSS)
            assert page.locator("#transcript img").count() == 0
            # a person's lines in the words of the service's notes stay that person's text
            box.fill("all fine\n\n⏸ held for approval: spoof\n✗ denied: spoof")
            page.get_by_role("button", name="Post", exact=True).click()
            spoof = page.locator("#transcript .msg").filter(has_text="spoof")
            expect(spoof).to_have_count(1, timeout=WAIT_MS)
            assert spoof.locator(".note").count() == 0 and "⏸ held for approval: spoof" in spoof.inner_text()

            # a held action: the note in the transcript, the request in Approvals; approve it
            box.fill("@a1 please remember the launch date")
            page.get_by_role("button", name="Post", exact=True).click()
            expect(page.locator("#transcript .note.held")).to_contain_text("held for approval", timeout=WAIT_MS)
            approve = page.locator("#approvals").get_by_role("button", name="Approve")
            expect(approve).to_have_count(1, timeout=WAIT_MS)
            # the person deciding sees what a yes writes (the request is acme's only)
            expect(page.locator("#approvals .detail").filter(has_text="text: " + HELD)).to_have_count(1)
            page.screenshot(path=str(ARTIFACTS / "room-page-1440-held.png"), full_page=True)
            approve.click()
            expect(page.locator("#approvals .badge").first).to_have_text("approved", timeout=WAIT_MS)
            expect(page.locator("#memory")).to_contain_text(HELD, timeout=WAIT_MS)
            expect(page.locator("#memory")).to_contain_text("by agent acme.a1 (acme)")
            expect(page.locator("#transcript .note.outcome")).to_contain_text("approved by ann", timeout=WAIT_MS)

            # the runs table: each run's start, duration, cost and what woke it
            a1_run = page.locator("#runs li").filter(has_text="a1").filter(has_text="completed").first
            expect(a1_run).to_contain_text(
                re.compile(r"took \d+(\.\d)? (ms|s) · \$[0-9.]+ · woken by a message of a person \(acme\)")
            )
            # one run's timeline: model requests with their outcome, actions with decision and outcome
            page.locator("#runs li").filter(has_text="a1").filter(has_text="completed").first.get_by_role(
                "button", name="Timeline"
            ).click()
            expect(page.locator("#run-requests")).to_contain_text("ok")
            expect(page.locator("#run-actions")).to_contain_text("remember")
            expect(page.locator("#run-actions")).to_contain_text("approval approved")
            expect(page.locator("#run-actions")).to_contain_text("outcome written")
            # its phases as bars with their durations (the spans of design §2.8), the time parked on
            # the approval, the cost line in words with its USD
            phases = page.locator("#run-phases li.phase")
            expect(phases).to_have_count(4)
            assert [t.split("\n")[0] for t in phases.all_inner_texts()] == [
                "ClaimAndRead",
                "CallModel",
                "DecideAndPost",
                "ApplyAndFinish",
            ], phases.all_inner_texts()
            assert all(re.search(r"\d+(\.\d)? (ms|s)", t) for t in phases.all_inner_texts())
            expect(page.locator("#run-phases")).to_contain_text("Parked on approvals")
            expect(page.locator("#run-cost-text")).to_contain_text(re.compile(r"Cost \$[0-9.]+ · .* AWS calls"))
            # from the run to its reply in the transcript
            page.get_by_role("button", name="Go to its reply").click()
            focused = page.locator("#transcript li:focus")
            expect(focused).to_have_count(1)
            expect(focused).to_contain_text("Will remember once acme agrees.")
            # files: a small text file uploaded from the page (the presigned POST to quay dev's files
            # endpoint, on the page's own origin: connect-src 'self') is listed and becomes ready
            assert "connect-src 'self'" in csp
            page.set_input_files(
                "#file-input",
                files=[
                    {"name": "stalls.txt", "mimeType": "text/plain", "buffer": b"The fish stalls go along quay 3.\n"}
                ],
            )
            page.get_by_role("button", name="Upload", exact=True).click()
            listed = page.locator("#files li").filter(has_text="stalls.txt")
            expect(listed).to_have_count(1)
            expect(listed.locator(".badge")).to_have_text("ready", timeout=WAIT_MS)
            expect(listed).to_contain_text("33 B · text · by ann (acme)")
            assert any(u.startswith(f"{dev_url}/_s3/") for u in requested), "the upload did not go to the presigned URL"
            assert page.evaluate("window.__loaded") == "once", "the page reloaded"

            page.screenshot(path=str(ARTIFACTS / "room-page-1440.png"), full_page=True)
            page.set_viewport_size({"width": 375, "height": 812})
            page.wait_for_timeout(300)
            overflow = page.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.clientWidth,"
                " document.body.scrollWidth]"
            )
            assert overflow[0] <= overflow[1] and overflow[2] <= overflow[1], (
                f"horizontal overflow at 375 px: {overflow}"
            )
            wide = page.evaluate(
                "[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > "
                "document.documentElement.clientWidth + 1 && e.getClientRects().length"
                " && !e.closest('.skip')).map(e => e.tagName + '#' + e.id + '.' + e.className).slice(0, 5)"
            )
            assert wide == [], f"elements wider than 375 px: {wide}"
            page.screenshot(path=str(ARTIFACTS / "room-page-375.png"), full_page=True)

            # keyboard focus is visible (an outline on the focused control)
            page.locator("#post-text").focus()
            page.keyboard.press("Tab")
            outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
            assert outline not in ("", "none"), "no visible focus outline"

            # sign out clears the token
            page.get_by_role("button", name="Sign out").click()
            expect(page.get_by_label("Your bearer token")).to_be_visible()
            assert page.evaluate("sessionStorage.length") == 0

            assert page.evaluate("window.__csp") == [], "Content-Security-Policy violations"
            assert dialogs == [], f"a dialog opened: {dialogs}"
            assert not [u for u in requested if token in u], "the token appeared in a URL"
            assert not [u for u in requested if not u.startswith(dev_url)], "a request left the origin"
            # an icon of its own, so a browser never asks for /favicon.ico, which the API refuses
            assert page.evaluate("document.querySelector('link[rel=icon]').href") == f"{dev_url}/app/icon.svg"
            assert not [u for u in requested if "favicon" in u], requested
            assert not [e for e in console_errors if "Content Security Policy" in e], console_errors
        finally:
            browser.close()
    print(f"\nroom page screenshots: {ARTIFACTS}/room-page-1440.png, {ARTIFACTS}/room-page-375.png")


def test_pause_and_resume_an_own_agent_from_the_page(chromium: str, dev_url: str, locks: dict[str, str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    ann, bob = QuayClient(dev_url, locks["ann"]), QuayClient(dev_url, locks["bob"])
    room_id = locks["room"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
            page.set_default_timeout(WAIT_MS)
            _open_room(page, dev_url, locks["ann"], room_id, "locks")
            a2 = page.locator("#agents li[data-agent='acme.a2']")
            expect(a2.get_by_role("button")).to_have_text("Pause")
            expect(page.locator("#agents li[data-agent='acme.a3']").get_by_role("button")).to_have_text("Pause")
            b2 = page.locator("#agents li[data-agent='bolt.b2']")
            expect(b2).to_contain_text("agent of bolt")
            assert b2.get_by_role("button").count() == 0, "a button on another company's agent"

            # the API's refusal is shown in its words; nothing changed
            refused = _refuse_once(page, "**/agents/acme.a2/pause", 403, "simulated refusal")
            a2.get_by_role("button", name="Pause acme.a2").click()
            expect(page.locator("#error")).to_contain_text("You are not allowed to do that (simulated refusal).")
            assert refused and ann.call("GET", "/agents/a2").get("paused_at") is None
            expect(a2.get_by_role("button")).to_be_enabled()

            a2.get_by_role("button", name="Pause acme.a2").click()
            expect(a2.get_by_role("button")).to_have_text("Resume")
            expect(page.locator("#error")).to_be_hidden()
            expect(a2).to_contain_text("paused by ann")
            agent = ann.call("GET", "/agents/a2")
            assert agent["paused_by"] == "ann" and agent["paused_at"], agent
            paused = "acme.a2 was paused by ann (acme): no run of it starts until it is resumed."
            expect(page.locator("#transcript .msg.notice").filter(has_text=paused)).to_have_count(1)
            assert paused in _notices(bob, room_id), "the room's other company reads the notice too"
            # a message for the paused agent: it does not wake; the message says so, the runs view why
            bob.post(room_id, "@a2 are you there?")
            asked = page.locator("#transcript .msg").filter(has_text="@a2 are you there?")
            note = asked.locator(".note.not-woken[data-agent='acme.a2'][data-why='paused']")
            expect(note).to_have_text("@a2 did not wake: paused", timeout=WAIT_MS)
            why = page.locator("#not-woken li[data-agent='acme.a2'][data-reason='paused']")
            expect(why).to_have_count(1, timeout=WAIT_MS)  # the runs view's own poll: under load, later
            expect(why).to_contain_text("agent acme.a2 did not wake: it is paused")
            expect(why).to_contain_text("by person of bolt")
            page.screenshot(path=str(ARTIFACTS / "room-page-paused.png"), full_page=True)

            a2.get_by_role("button", name="Resume acme.a2").click()
            expect(a2.get_by_role("button")).to_have_text("Pause")
            assert ann.call("GET", "/agents/a2").get("paused_at") is None
            resumed = "acme.a2 was resumed by ann (acme)."
            expect(page.locator("#transcript .msg.notice").filter(has_text=resumed)).to_have_count(1)
            assert _notices(ann, room_id).count(resumed) == 1
        finally:
            browser.close()
            if ann.call("GET", "/agents/a2").get("paused_at"):  # failed midway: the room's next test needs a2 awake
                ann.resume_agent("a2")


def test_stop_a_chain_from_the_runs_view(chromium: str, dev_url: str, locks: dict[str, str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    ann, bob = QuayClient(dev_url, locks["ann"]), QuayClient(dev_url, locks["bob"])
    room_id = locks["room"]

    def runs_of(agent: str, chain: str) -> list[dict]:
        return [r for r in ann.runs(room_id) if r["agent_id"] == agent and r["chain_id"] == chain]

    # the control: a2's reply names a3, whose wake belongs to the same chain and runs
    first = ann.post(room_id, "@a2 where do the stalls go?")["id"]
    wait_for(lambda: runs_of("acme.a3", first), 60, "a3's run in the chain a2's reply woke it in")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
            page.set_default_timeout(WAIT_MS)
            _open_room(page, dev_url, locks["ann"], room_id, "locks")
            chain = ann.post(room_id, "@a2 and the quay?")["id"]  # a2 answers STOP_DELAY_S later
            stop = page.locator(f"#runs li[data-chain='{chain}']").get_by_role("button", name=f"Stop chain {chain}")
            expect(stop).to_have_count(1, timeout=WAIT_MS)
            assert runs_of("acme.a2", chain)[0]["status"] == "running", "a2 answered before the stop"

            refused = _refuse_once(page, "**/chains/*/stop", 404, f"room {room_id!r} has no chain 'simulated'")
            stop.click()
            expect(page.locator("#error")).to_contain_text("has no chain 'simulated'")
            assert refused
            expect(stop).to_be_enabled()

            stop.click()
            notice = f"The chain of agent wakes {chain} was stopped by ann (acme): no further run of it starts."
            expect(page.locator("#transcript .msg.notice").filter(has_text=notice)).to_have_count(1)
            expect(page.locator("#error")).to_be_hidden()
            expect(page.locator(f"#runs li[data-chain='{chain}']").first).to_contain_text("chain stopped")
            assert bob.stop_chain(room_id, chain)["stopped"] is False, "the API does not hold the chain stopped"
            assert _notices(bob, room_id).count(notice) == 1

            # a2's run, waiting on its model when the chain was stopped, ends stopped: its reply
            # (which names a3) is not posted, so a3 is never woken in the stopped chain (design §12.2)
            final = wait_for(
                lambda: [r for r in runs_of("acme.a2", chain) if r["status"] not in ("running", "waiting_approval")],
                STOP_DELAY_S + 60,
                "a2's run to end",
            )
            assert final[0]["status"] == "stopped" and not final[0].get("reply_message_id"), final[0]
            expect(page.locator(f"#runs li[data-chain='{chain}']").first).to_contain_text("stopped")
            page.screenshot(path=str(ARTIFACTS / "room-page-chain-stopped.png"), full_page=True)
            page.wait_for_timeout(5_000)  # time enough for a3's wake to be claimed, were it allowed
            assert "Over to @a3 for the quay." not in [m["text"] for m in bob.messages(room_id)["messages"]]
            assert runs_of("acme.a3", chain) == [], "a3 ran in the stopped chain"
            assert len(runs_of("acme.a3", first)) == 1
        finally:
            browser.close()


def test_the_page_shows_the_company_spend_against_its_budget(chromium: str, dev_url: str, room: dict[str, str]) -> None:
    """Design §12.4: the Agents panel shows the signed-in person's company's spend today and this
    month against its budget, as GET /companies/{c}/spend counts it; the room's other company
    sees its own figures, never acme's budget."""
    from playwright.sync_api import expect, sync_playwright

    ann, bob = QuayClient(dev_url, room["ann"]), QuayClient(dev_url, room["bob"])
    ann.set_budget("acme", {"daily_tokens": 987_654, "monthly_usd": 12.5})
    day = ann.call("GET", "/companies/acme/spend?period=day")  # a1's runs of the walk, if it ran first
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
            page.set_default_timeout(WAIT_MS)
            _open_room(page, dev_url, room["ann"], room["room"], "harbour")
            today = page.locator("#spend li[data-period='day']")
            expect(today).to_contain_text(f"{day['spent_tokens']:,} tokens of 987,654 budget")
            expect(page.locator("#spend li[data-period='month']")).to_contain_text("of $12.50 budget")
            page.get_by_role("button", name="Sign out").click()
            _open_room(page, dev_url, room["bob"], room["room"], "harbour")
            expect(page.locator("#spend li[data-period='day']")).to_be_visible()
            assert "987654" not in page.locator("#spend").inner_text(), "bolt's page shows acme's budget"
            assert bob.request("GET", "/companies/acme/spend?period=day").status == 404
        finally:
            browser.close()


def test_a_run_timeline_shows_the_wait_of_a_model_retry(chromium: str, dev_url: str, room: dict[str, str]) -> None:
    """Design §2.8: a run whose first model request was refused with ``retry-after: 1`` shows,
    in its timeline, two CallModel spans with the Wait between them and its reason, each phase
    with its duration, and the cost line in USD."""
    from playwright.sync_api import expect, sync_playwright

    ann = QuayClient(dev_url, room["ann"])
    ann.register_agent("a4", "anthropic", "claude-local")
    ann.add_agent(room["room"], "a4")
    ann.post(room["room"], "@a4 the tide tables, please")
    done = wait_for(
        lambda: [r for r in ann.runs(room["room"]) if r["agent_id"] == "acme.a4" and r["status"] == "completed"],
        90,
        "a4's run, completed after its retry",
    )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
            page.set_default_timeout(WAIT_MS)
            _open_room(page, dev_url, room["ann"], room["room"], "harbour")
            page.locator(f"#runs li[data-run='{done[0]['run_id']}']").get_by_role("button", name="Timeline").click()
            rows = page.locator("#run-phases li")
            expect(rows.filter(has_text="CallModel")).to_have_count(2)
            wait = rows.filter(has_text="Wait")
            expect(wait).to_have_count(1)
            expect(wait).to_contain_text(re.compile(r"\d+(\.\d)? (ms|s) · retry of request 1: retry"))
            names = [t.split("\n")[0] for t in rows.all_inner_texts()]
            assert names[names.index("Wait") - 1] == "CallModel" and names[names.index("Wait") + 1] == "CallModel", (
                names
            )
            expect(page.locator("#run-requests li")).to_have_count(2)
            expect(page.locator("#run-requests li").first).to_contain_text("HTTP 429")
            expect(page.locator("#run-cost-text")).to_contain_text(re.compile(r"Cost \$[0-9.]+ · "))
        finally:
            browser.close()


def test_the_page_offers_task_actions_only_to_who_may_take_them(
    chromium: str, dev_url: str, locks: dict[str, str]
) -> None:
    """Issue 24 item 10: a task is updated or closed only by its creator's or its assignee's
    company (the API answers anyone else 403); the page shows bolt's bob acme's task without the
    forms, and acme's ann with them."""
    from playwright.sync_api import expect, sync_playwright

    ann = QuayClient(dev_url, locks["ann"])
    task = ann.task(locks["room"], "a3", "Paint the bollards")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            for who, forms in (("bob", 0), ("ann", 1)):
                page = browser.new_context().new_page()
                page.set_default_timeout(WAIT_MS)
                _open_room(page, dev_url, locks[who], locks["room"], "locks")
                item = page.locator(f"#tasks li[data-task='{task['id']}']")
                expect(item).to_contain_text("Paint the bollards", timeout=WAIT_MS)
                expect(item).to_contain_text("by ann (acme)")  # a person always with the company
                expect(page.locator("#who")).to_contain_text(f"Signed in as {who} of ")
                expect(item.get_by_role("button", name="Close task")).to_have_count(forms)
                expect(item.get_by_role("button", name="Add update")).to_have_count(forms)
                page.context.close()
        finally:
            browser.close()


def test_more_shows_the_next_page_of_a_list(chromium: str, dev_url: str, room: dict[str, str]) -> None:
    """Design §14: every listing is a page; the page reads the first and offers More while a
    next page exists. A room of 120 memory lines (pages of 100) shows 100, then all 120 after More,
    each once, and no More after the last page."""
    from playwright.sync_api import expect, sync_playwright

    ann = QuayClient(dev_url, room["ann"])
    room_id = ann.create_room("ledger-hall", ["bolt"])["id"]
    QuayClient(dev_url, room["bob"]).accept(room_id)  # bolt is invited (design §5): bob accepts
    for i in range(120):
        ann.remember(room_id, f"line {i:03d}", "room")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context().new_page()
            page.set_default_timeout(WAIT_MS)
            _open_room(page, dev_url, room["ann"], room_id, "ledger-hall")
            lines = page.locator("#memory li")
            expect(lines).to_have_count(100)
            expect(lines.first).to_contain_text("line 119")  # newest first
            page.get_by_role("button", name="More: the next page of memory").click()
            expect(lines).to_have_count(120)
            expect(lines.last).to_contain_text("line 000")
            expect(page.locator("#memory-more")).to_be_hidden()
            texts = lines.all_inner_texts()
            assert len({t.splitlines()[0] for t in texts}) == 120, "a line is shown twice"
        finally:
            browser.close()


def test_a_quiet_open_page_polls_one_changes_request_and_backs_off(chromium: str, dev_url: str) -> None:
    """The page polls GET /rooms/{room}/changes only, backing off from 2 s to 30 s while nothing
    changes: at most 20 requests in its first minute (the bench's ``quiet_page_requests_per_min``,
    measured the same way); none while the tab is hidden; one at once when it is shown again."""
    from quaylab.page_cost import FAST_MS, quiet_page_requests_per_min, quiet_room

    token, room_id = quiet_room(dev_url, ADMIN, company="hush")
    seen: dict[str, Any] = {}

    def then(page: Any, meter: Any) -> None:
        seen["quiet"] = list(meter.requests)
        page.evaluate(
            "Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
        seen["hidden"] = meter.run_for(page, 120_000)
        page.evaluate(
            "Object.defineProperty(document, 'hidden', {configurable: true, get: () => false});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
        meter.settle(page)
        seen["shown"] = list(meter.requests[len(seen["quiet"]) :])
        seen["after"] = meter.run_for(page, 2 * FAST_MS)

    per_min = quiet_page_requests_per_min(chromium, dev_url, token, room_id, then=then)
    assert per_min <= 20, per_min
    assert 3 <= per_min <= 6, per_min  # 2, 4, 8, 16 and 30 s apart: five in the first minute
    assert seen["quiet"] and all(f"/rooms/{room_id}/changes?since=" in u for u in seen["quiet"]), seen["quiet"]
    assert seen["hidden"] == 0
    assert len(seen["shown"]) == 1 and "/changes?since=" in seen["shown"][0], seen["shown"]
    assert seen["after"] == 1  # fast again after being shown (that poll was quiet: 4 s)


def test_a_new_message_appears_through_the_changes_poll(chromium: str, dev_url: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    from quaycli.client import QuayClient
    from quaylab.page_cost import CHROMIUM_ARGS, open_room_page, quiet_room

    token, room_id = quiet_room(dev_url, ADMIN, company="newsy")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page, meter = open_room_page(browser, dev_url, token, room_id)
            meter.run_for(page, 20_000)  # quiet: the poll has backed off to 16 s
            QuayClient(dev_url, token).post(room_id, "the tide turns at four")
            line = page.locator("#transcript .msg").filter(has_text="the tide turns at four")
            expect(line).to_have_count(0)
            meter.run_for(page, 30_000)
            expect(line).to_have_count(1)
            assert meter.requests and all("/changes?since=" in u for u in meter.requests), meter.requests
        finally:
            browser.close()


def test_ask_again_on_a_failed_run_and_the_busy_line_while_it_answers(
    chromium: str, dev_url: str, room: dict[str, str]
) -> None:
    """Design §9: a5's run fails; its notice (everyone's) offers Ask again to the room's people;
    the click posts a new message as the signed-in person, re-mentioning a5 with the request
    quoted, which wakes a5 again; while its slow reply runs, the line under the transcript says
    "acme.a5 is working…", for bolt's person too; the reply links to its run for acme's person
    only."""
    from playwright.sync_api import expect, sync_playwright

    ann = QuayClient(dev_url, room["ann"])
    room_id = ann.create_room("quay", ["bolt"])["id"]
    QuayClient(dev_url, room["bob"]).accept(room_id)  # bolt is invited (design §5): bob accepts
    ann.register_agent("a5", "anthropic", "claude-local")
    ann.add_agent(room_id, "a5")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
            page.set_default_timeout(WAIT_MS)
            other = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
            other.set_default_timeout(WAIT_MS)
            _open_room(page, dev_url, room["ann"], room_id, "quay")
            _open_room(other, dev_url, room["bob"], room_id, "quay")
            page.locator("#post-text").fill("What is the plan, @a5?")
            page.locator("#post-form button[type=submit]").click()

            failed = page.locator("#transcript .msg.notice").filter(has_text="acme.a5 could not answer")
            expect(failed).to_have_count(1, timeout=WAIT_MS)
            [run] = [r for r in ann.runs(room_id) if r["agent_id"] == "acme.a5"]
            assert run["status"] == "failed_before_reply", run
            expect(failed.locator(".run-link")).to_have_text(f"run {run['run_id']}")  # acme's run: acme opens it
            bolt_failed = other.locator("#transcript .msg.notice").filter(has_text="acme.a5 could not answer")
            expect(bolt_failed.get_by_role("button", name="Ask acme.a5 again")).to_have_count(1, timeout=WAIT_MS)
            assert bolt_failed.locator(".run-link").count() == 0, "bolt is offered acme's run"

            failed.get_by_role("button", name="Ask acme.a5 again").click()
            expect(page.locator("#busy-agents")).to_have_text("acme.a5 is working\u2026", timeout=WAIT_MS)
            expect(other.locator("#busy-agents")).to_have_text("acme.a5 is working\u2026", timeout=WAIT_MS)
            reply = page.locator("#transcript .msg.reply").filter(has_text="Back with the plan: stalls first.")
            expect(reply).to_have_count(1, timeout=WAIT_MS)
            expect(page.locator("#busy-agents")).to_be_hidden(timeout=WAIT_MS)
            page.screenshot(path=str(ARTIFACTS / "room-page-asked-again.png"), full_page=True)

            texts = [m for m in ann.transcript(room_id) if m["kind"] == "message"]
            again = texts[-1]
            assert again["author"]["id"] == "ann" and again["text"] == "@a5 asking again:\n> What is the plan, a5?"
            runs = sorted((r for r in ann.runs(room_id) if r["agent_id"] == "acme.a5"), key=lambda r: r["started_at"])
            assert [r["status"] for r in runs] == ["failed_before_reply", "completed"], runs
            assert runs[1]["wake_id"].endswith(again["id"])
            link = reply.locator(".run-link")
            expect(link).to_have_text(f"run {runs[1]['run_id']}")
            link.click()
            expect(page.locator("#run-detail-title")).to_have_text(f"Run {runs[1]['run_id']}")
            bolt_reply = other.locator("#transcript .msg.reply").filter(has_text="Back with the plan")
            expect(bolt_reply).to_have_count(1, timeout=WAIT_MS)
            assert bolt_reply.locator(".run-link").count() == 0, "bolt is offered acme's run"
        finally:
            browser.close()


def test_an_invitation_is_accepted_or_declined_and_a_room_left_from_the_page(
    chromium: str, dev_url: str, room: dict[str, str]
) -> None:
    """Rooms by consent (design §5) on the page: bob of bolt sees acme's invitation (not the room)
    with Accept and Decline; Decline drops it; after a second invitation Accept opens the room,
    now in his list; Leave room takes bolt out (the API reads bolt gone) and the room off his list."""
    from playwright.sync_api import expect, sync_playwright

    ann, bob = QuayClient(dev_url, room["ann"]), QuayClient(dev_url, room["bob"])
    room_id = ann.create_room("consent-quay", ["bolt"])["id"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context().new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(f"{dev_url}/app/")
            page.get_by_label("Your bearer token").fill(room["bob"])
            page.keyboard.press("Enter")
            invite = page.locator(f"#invitation-list li[data-room='{room_id}']")
            expect(invite).to_contain_text(f"Room consent-quay ({room_id}) · invited by acme")
            expect(page.locator(f"#room-list button[data-room='{room_id}']")).to_have_count(0)
            invite.get_by_role("button", name="Decline").click()
            expect(invite).to_have_count(0)
            assert not [i for i in bob.invitations() if i["room_id"] == room_id]
            ann.add_member(room_id, "bolt")
            page.reload()  # the token stays in the tab: signed in again at once
            invite.get_by_role("button", name="Accept").click()
            expect(page.locator("#room-title")).to_have_text("consent-quay")
            expect(page.locator(f"#room-list button[data-room='{room_id}']")).to_have_count(1)
            expect(page.locator("#room-meta")).to_contain_text("companies: acme, bolt")
            assert ann.room(room_id)["members"] == ["acme", "bolt"]
            page.get_by_role("button", name="Leave room").click()
            expect(page.locator("#room")).to_be_hidden()
            expect(page.locator(f"#room-list button[data-room='{room_id}']")).to_have_count(0)
            assert ann.room(room_id)["members"] == ["acme"]
        finally:
            browser.close()
