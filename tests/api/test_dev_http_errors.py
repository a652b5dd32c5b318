"""`quay dev`'s HTTP server answers its own refusals in the API's error shape (its own process:
a DevServer starts and stops a local stack, which no other fixture of a module may share)."""

from __future__ import annotations

import json


def test_quay_devs_http_server_refuses_in_the_api_error_shape_too() -> None:
    """A URL or a header too long for the HTTP server itself: JSON ``{error, message, fields}``,
    not http.server's HTML page."""
    import http.client

    from quaylocal.dev import DevServer

    with DevServer(port=0, time_scale=0.01) as dev:
        host, port = dev.url.split("//")[1].split(":")
        long_url = http.client.HTTPConnection(host, int(port), timeout=10)
        long_url.request("GET", "/rooms/" + "x" * 70_000)
        big_header = http.client.HTTPConnection(host, int(port), timeout=10)
        big_header.putrequest("GET", "/rooms")
        big_header.putheader("X-Big", "y" * 70_000)
        big_header.endheaders()
        for conn, status in ((long_url, 414), (big_header, 431)):
            r = conn.getresponse()
            body = json.loads(r.read())
            assert r.status == status and r.getheader("Content-Type") == "application/json", (r.status, body)
            assert body["error"] == "bad_request" and body["message"] and body["fields"] == [], body
