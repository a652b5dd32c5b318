"""`quay file add|list|rm` against a real `quay dev` (issue 11 "Done when"): a Markdown file and a
PDF uploaded with the CLI become ``ready`` and the agent's next run quotes a passage from each (its
model request, read where the test's own provider server recorded it); an encrypted PDF is
``failed`` with its reason; a 30 MB file is refused before anything is uploaded.

The agent is ``openai-compatible`` with its ``base_url`` on a provider server this test runs
(quay dev allows loopback model addresses), so the test reads the request the run really sent."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quay.main import app as cli
from quaycli.client import QuayClient
from quaydev import quay_dev, wait_for
from quaylocal.provider_server import ProviderServer

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

ADMIN = "qyt_admin_file_cli_test_0001"
MD_PASSAGE = "The gangway at berth nine opens at 06:40 for the lighthouse crew."
PDF_PASSAGE = "Tugboat Albatross tows the pontoon past the breakwater on Thursday."


def _pdf(text: str, password: str | None = None) -> bytes:
    """A one-page PDF drawing ``text`` in Helvetica, made with pypdf (encrypted with a user
    password when given)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    w = PdfWriter()
    page = w.add_blank_page(612, 792)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): w._add_object(font)})}
    )
    content = DecodedStreamObject()
    content.set_data(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode())
    page[NameObject("/Contents")] = w._add_object(content)
    if password:
        w.encrypt(user_password=password, owner_password="owner-" + password, algorithm="AES-128")
    out = io.BytesIO()
    w.write(out)
    return out.getvalue()


@pytest.fixture(scope="module")
def dev(tmp_path_factory) -> Iterator[tuple[str, ProviderServer]]:
    tmp = tmp_path_factory.mktemp("quay-dev-files")
    with ProviderServer(scripts={}, keys={}) as models, quay_dev(tmp, admin_token=ADMIN) as url:
        yield url, models


def _quay(url: str, token: str, *args: str, code: int = 0):
    result = CliRunner().invoke(cli, [*args, "--url", url, "--token", token])
    assert result.exit_code == code, (args, result.exit_code, result.output, result.stderr)
    return result


def test_markdown_and_pdf_become_ready_and_reach_the_agent(dev, tmp_path: Path) -> None:
    url, models = dev
    admin = QuayClient(url, ADMIN)
    admin.create_company("acme", ["ann"])
    ann = QuayClient(url, admin.issue_token("acme", "ann")["token"])
    ann.register_agent(
        "f1", "openai-compatible", "local-model", api_key="sk-acme-local", base_url=models.base_url("openai-compatible")
    )
    room = ann.create_room("files")["id"]
    ann.add_agent(room, "f1")

    md = tmp_path / "berths.md"
    md.write_text(f"# Berths\n\n{MD_PASSAGE}\n")
    pdf = tmp_path / "tugs.pdf"
    pdf.write_bytes(_pdf(PDF_PASSAGE))
    out = _quay(url, ann.token, "file", "add", room, str(md), "--wait").stdout
    assert " berths.md " in out and " markdown  ready (1 chunk)  by ann (acme)" in out, out
    added = json.loads(_quay(url, ann.token, "file", "add", room, str(pdf), "--wait", "--json").stdout)
    assert (added["name"], added["kind"], added["status"], added["content_type"]) == (
        "tugs.pdf",
        "pdf",
        "ready",
        "application/pdf",
    )
    listed = _quay(url, ann.token, "file", "list", room).stdout
    assert "berths.md" in listed and "tugs.pdf" in listed and "uploading" not in listed

    # the agent's next run: its model request carries a passage from each file
    ann.post(room, "@f1 when does the gangway at berth nine open, and when does tugboat Albatross tow?")
    wait_for(
        lambda: any(m["kind"] == "reply" and m["author"]["id"] == "acme.f1" for m in ann.transcript(room)),
        60,
        "f1's reply",
    )
    sent = json.dumps([r.body for r in models.requests if r.agent_id == "acme.f1"])
    assert MD_PASSAGE in sent and PDF_PASSAGE in sent

    # rm: the uploader's company deletes; the file leaves the list
    _quay(url, ann.token, "file", "rm", room, added["id"])
    assert [f["name"] for f in ann.files(room)] == ["berths.md"]


def test_encrypted_pdf_fails_with_its_reason_and_a_30_mb_file_is_refused(dev, tmp_path: Path) -> None:
    url, _ = dev
    admin = QuayClient(url, ADMIN)
    admin.create_company("bolt", ["bob"])
    bob = QuayClient(url, admin.issue_token("bolt", "bob")["token"])
    room = bob.create_room("locked")["id"]

    locked = tmp_path / "locked.pdf"
    locked.write_bytes(_pdf("a secret plan", password="open-sesame"))
    failed = _quay(url, bob.token, "file", "add", room, str(locked), "--wait", code=1)
    assert "locked.pdf" in failed.stdout and "failed: encrypted PDF" in failed.stdout, failed.stdout
    [f] = bob.files(room)
    assert f["status"] == "failed" and f["reason"].startswith("encrypted PDF")

    big = tmp_path / "big.txt"
    with big.open("wb") as fh:
        fh.truncate(30 * 1024 * 1024)
    refused = CliRunner().invoke(cli, ["file", "add", room, str(big), "--url", url, "--token", bob.token])
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.exit_code == 2 and len(lines) == 1, (refused.exit_code, refused.stderr)
    assert "big.txt is 30.0 MB" in lines[0] and "25 MB limit" in lines[0] and "nothing uploaded" in lines[0]
    assert len(bob.files(room)) == 1  # nothing declared for it

    missing = CliRunner().invoke(cli, ["file", "list", "no-such-room", "--url", url, "--token", bob.token])
    assert missing.exit_code == 1 and "HTTP 404" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
