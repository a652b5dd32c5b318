"""What an open room page costs the API (design §9): the requests a minute of the real page
(``functions/quayutec/api/static/app``) in headless Chromium, against a running ``quay dev``.

The page's clock is Playwright's fake clock (``page.clock``), so a minute of the page's timers
passes in a few seconds: the clock moves on in steps, and after each step the measurement waits
(in real time) until no request of the page is in flight, so every poll a timer starts has its
answer, and schedules the next, before the clock moves on. What is counted is every request to
the API (not the page's own files) after the room is open and its first reads are done.

Used by ``make bench`` (``"big_room": {"quiet_page_requests_per_min": x}``) and by
``tests/browser/test_room_page.py``, which pins it (at most 20 a minute)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Headless Chromium from the distribution's packages, as the browser tests start it.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
#: How far the page's fake clock moves at a time (ms): the measurement's resolution.
STEP_MS = 250
#: The page's poll delays (ms), as app.js has them: 2 s after a change, doubling to 30 s.
FAST_MS, QUIET_MS = 2000, 30000


@dataclass
class PageMeter:
    """Counts an open page's API requests (``base``: the API's origin; the page's own files under
    ``/app/`` are not counted) and those in flight."""

    base: str
    requests: list[str] = field(default_factory=list)
    in_flight: int = 0

    def watch(self, page: Any) -> None:
        def started(request: Any) -> None:
            self.in_flight += 1
            if request.url.startswith(self.base) and "/app/" not in request.url:
                self.requests.append(request.url)

        def ended(_: Any) -> None:
            self.in_flight = max(0, self.in_flight - 1)

        page.on("request", started)
        page.on("requestfinished", ended)
        page.on("requestfailed", ended)

    def settle(self, page: Any, timeout_s: float = 30.0) -> None:
        """Wait (real time) until no request of the page has been in flight for a moment."""
        deadline = time.monotonic() + timeout_s
        quiet = 0
        while quiet < 2:
            page.wait_for_timeout(15)  # real time: Playwright's own timer, not the page's
            quiet = quiet + 1 if self.in_flight == 0 else 0
            if time.monotonic() > deadline:
                raise AssertionError(f"the page kept {self.in_flight} requests in flight for {timeout_s} s")

    def run_for(self, page: Any, ms: int, step_ms: int = STEP_MS) -> int:
        """Move the page's fake clock on by ``ms``, ``step_ms`` at a time, each step's requests
        answered before the next; the API requests made meanwhile."""
        before = len(self.requests)
        for _ in range(max(1, ms // step_ms)):
            page.clock.run_for(step_ms)
            self.settle(page)
        return len(self.requests) - before


def open_room_page(browser: Any, dev_url: str, token: str, room_id: str) -> tuple[Any, PageMeter]:
    """A new page with a fake clock, signed in with ``token``, room ``room_id`` open and its
    first reads done; its meter counts from here on."""
    from playwright.sync_api import expect

    page = browser.new_page()
    page.set_default_timeout(60_000)
    meter = PageMeter(dev_url)
    meter.watch(page)
    page.clock.install()
    page.goto(f"{dev_url}/app/")
    page.get_by_label("Your bearer token").fill(token)
    page.keyboard.press("Enter")
    page.locator(f"#room-list button[data-room='{room_id}']").click()
    expect(page.locator("#status")).to_contain_text("Up to date")
    meter.settle(page)
    meter.requests.clear()
    return page, meter


def quiet_page_requests_per_min(
    chromium: str,
    dev_url: str,
    token: str,
    room_id: str,
    minutes: int = 1,
    then: Callable[[Any, PageMeter], None] | None = None,
) -> float:
    """Requests a minute the room page makes while open on a quiet room (nothing changes), over
    the first ``minutes`` minutes after it opened (its back-off from 2 s to 30 s included: the
    first minute is the dearest). ``then``: called with the page and its meter afterwards (a
    test's further checks). Needs Playwright for Python and ``chromium``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page, meter = open_room_page(browser, dev_url, token, room_id)
            made = meter.run_for(page, minutes * 60_000)
            if then is not None:
                then(page, meter)
            return made / minutes
        finally:
            browser.close()


def quiet_room(dev_url: str, admin_token: str, company: str = "quiet") -> tuple[str, str]:
    """A room of company ``company`` (made here: one person, one agent, a few messages that wake
    no one): its person's token and the room's id."""
    from quaycli.client import QuayClient

    admin = QuayClient(dev_url, admin_token)
    admin.create_company(company, ["quinn"])
    quinn = QuayClient(dev_url, admin.issue_token(company, "quinn")["token"])
    room_id = quinn.create_room("quiet harbour")["id"]
    quinn.register_agent("q1", "anthropic", "claude-local", api_key="sk-quiet-local")
    quinn.add_agent(room_id, "q1")
    for i in range(5):
        quinn.post(room_id, f"note {i}")
    return str(quinn.token), str(room_id)
