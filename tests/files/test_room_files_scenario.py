"""A scenario with a 3 MB text file (given by ``path:``) whose answer is in its last paragraph:
the file goes through S3 and ingest like an upload, and the answer reaches the agent's model
request (``expect.seen_by``). Its own module: the player starts its own local stack."""

from __future__ import annotations

import textwrap
from pathlib import Path

from test_room_files import big_text

from quaylocal.scenario import Player, Scenario


def test_a_3_mb_file_answer_reaches_the_model_request(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "harbour-log.txt").write_text(big_text())
    assert (tmp_path / "docs" / "harbour-log.txt").stat().st_size > 3_000_000
    (tmp_path / "room.yaml").write_text(
        textwrap.dedent("""\
        companies:
          - {id: tide, people: [tess]}
        agents:
          - {id: keeper, company: tide, provider: anthropic, model: claude-test, instructions: Answer from the files.}
        room:
          id: vault-room
          members: [tide]
          files:
            - {name: harbour-log.txt, path: docs/harbour-log.txt}
        steps:
          - post: {as: tess, text: "What is the vault code?", to: [keeper]}
        expect:
          replies: {keeper: 1}
          runs: {completed: 1}
          seen_by: {keeper: ["PELICAN-4242"]}
        """)
    )
    result = Player(Scenario.load(tmp_path / "room.yaml"), time_scale=0.01, quiet_timeout_s=120).play()
    assert result.failures == [], result.failures
