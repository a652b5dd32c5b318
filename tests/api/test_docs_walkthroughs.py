"""The shell walk-throughs of README.md and docs/api.md, run as written against a real
`quay dev` (only the address and the operator token are the test's): a new user can follow them
from `quay dev` to an approved held action (issue 12)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from quaydev import REPO_ROOT, quay_dev

pytestmark = pytest.mark.skipif(
    not (shutil.which("curl") and shutil.which("jq")), reason="the walk-throughs use curl and jq"
)

FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks(path: Path, heading: str, lang: str) -> list[str]:
    """The ``lang`` code blocks of the section under ``heading`` (up to the next heading of the
    same or a higher level; ``#`` lines inside code blocks are comments, not headings)."""
    level = len(heading.split(" ", 1)[0])
    lines = path.read_text().splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.rstrip("\n") == heading)
    section, fenced = [], False
    for ln in lines[start + 1 :]:
        if ln.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(rf"#{{1,{level}}} ", ln):
            break
        section.append(ln)
    return [body for kind, body in FENCE.findall("".join(section)) if kind == lang]


def _run(script: str, url: str, admin: str, cwd: Path) -> str:
    """Run a walk-through with ``set -e`` from the repository root, as a reader would, pointed at
    this quay dev (its port and operator token); the `quay dev` lines are the test's own server,
    so they are left out. ``cwd`` is the reader's home."""
    lines = [ln for ln in script.splitlines() if "quay dev" not in ln or ln.lstrip().startswith("#")]
    body = "\n".join(lines).replace("http://127.0.0.1:8787", url)
    body = re.sub(r"qyt_admin_local_\w+", admin, body)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", body],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
        # PYTHONPATH passes through: a worktree's run of the suite (PYTHONPATH=functions:infra)
        # has its `quay` import the worktree's code, not the checkout the virtualenv installed.
        env={
            "PATH": f"{REPO_ROOT / '.venv' / 'bin'}:/usr/bin:/bin",
            "HOME": str(cwd),
            **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
        },
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_docs_api_walkthrough_reaches_an_approved_held_action(tmp_path: Path) -> None:
    doc = REPO_ROOT / "docs" / "api.md"
    scripts = _blocks(doc, "## Walk-through with curl on `quay dev`", "json")
    assert len(scripts) == 1
    (tmp_path / "scripts.json").write_text(scripts[0])
    json.loads(scripts[0])
    admin = "qyt_admin_docs_walkthrough_01"
    curl = _blocks(doc, "## Walk-through with curl on `quay dev`", "sh")
    cli = _blocks(doc, "## The `quay` client", "sh")
    assert len(cli) == 1
    marker = "=== the quay client section ==="
    with quay_dev(tmp_path, "--scripts", str(tmp_path / "scripts.json"), admin_token=admin) as url:
        # the CLI section follows the curl section in the same shell (issue 24 item 9)
        both = "\n".join([*curl, f"echo '{marker}'", cli[0]])
        out, cli_out = _run(both, url, admin, tmp_path).split(marker + "\n", 1)
    assert "approved" in cli_out and "Stalls on the north quay" in cli_out  # approved from the CLI: written
    assert "Draw the stall map" in cli_out and "c1" in cli_out  # quay task list
    assert "request 1" in cli_out  # quay ledger RUN
    assert '"author": "bolt.b1"' in out  # b1's reply was there after the pause (ids: COMPANY.NAME)
    # the room file: uploaded through the presigned form, ingested, downloaded as an attachment
    assert "\n204\n" in out and 'content-disposition: attachment; filename="stalls.md"' in out.lower()
    assert "x-content-type-options: nosniff" in out.lower()
    assert "idempotent-replayed" in out.lower()
    assert '"error": "idempotency_key_reused"' in out.replace('":"', '": "')
    assert '"not_found"' in out  # bob may not decide acme's held action: to him it does not exist
    assert '"Launch on the 12th"' in out  # approved: the memory line is written


def test_readme_walkthroughs_get_a_reply(tmp_path: Path) -> None:
    readme = REPO_ROOT / "README.md"
    blocks = _blocks(readme, "## The room API and `quay dev`", "sh")
    assert len(blocks) == 2
    admin = "qyt_admin_readme_walkthrough1"
    (tmp_path / "cli").mkdir()
    (tmp_path / "curl").mkdir()
    # each block is played on a fresh `quay dev`, as the README says: the CLI block has issued
    # acme's first token, and an operator issues only that one (design §5)
    with quay_dev(tmp_path / "cli", admin_token=admin) as url:
        cli_out = _run(blocks[0], url, admin, tmp_path)
    with quay_dev(tmp_path / "curl", admin_token=admin) as url:
        curl_out = _run(blocks[1], url, admin, tmp_path)
    assert "echo" in cli_out  # quay room shows a1's (echo) reply
    assert '"kind":"reply"' in curl_out.replace(" ", "")
