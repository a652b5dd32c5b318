"""The local engine's start-up and waiting shortcuts (``quay demo``'s time, issue 13 item 4): moto's
Batch package put in place without its EC2 imports, the ASL parse tree kept per definition,
provider SDKs imported while a Wait state waits, pokes that wake only the pollers a write can
feed. Outcomes and orders only, no timings."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from moto.stepfunctions.parser.asl.parse.asl_parser import ASLParserException

from quaylocal import moto_patches
from quaylocal import stack as st

ROOT = Path(__file__).resolve().parents[2]


def test_the_local_stack_imports_no_batch_or_ec2_backend_and_batch_still_answers() -> None:
    code = (
        "import sys\n"
        "import quaylocal.stack\n"
        "assert 'moto.batch.models' not in sys.modules and 'moto.ec2' not in sys.modules, 'imported'\n"
        "import boto3\n"
        "from moto import mock_aws\n"
        "with mock_aws():\n"
        "    print(boto3.client('batch', region_name='us-east-1').describe_compute_environments()"
        "['computeEnvironments'])\n"
    )
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.unit
def test_an_asl_definition_is_parsed_once_and_each_caller_gets_its_own_program() -> None:
    definition = st.ASL_PATH.read_text()
    first_program, first_tree = moto_patches._parse_asl_once(definition)
    second_program, second_tree = moto_patches._parse_asl_once(definition)
    assert second_tree is first_tree
    assert second_program is not first_program
    assert type(second_program) is type(first_program)
    assert [type(s) for s in second_program.states.states.values()] == [
        type(s) for s in first_program.states.states.values()
    ]


@pytest.mark.unit
def test_an_asl_definition_that_does_not_parse_raises_every_time_and_is_not_kept() -> None:
    broken = '{"StartAt": "A", "States": {"A": {"Type": "Pass", "End": tru'
    for _ in range(2):
        with pytest.raises(ASLParserException):
            moto_patches._parse_asl_once(broken)
    assert broken not in moto_patches._asl_trees


@pytest.mark.unit
def test_modules_asked_for_are_imported_when_a_wait_state_begins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "quay_warm_probe.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "quay_warm_probe", raising=False)
    waited: list[object] = []
    monkeypatch.setattr(st, "_original_wait_eval_body", lambda self, env: waited.append(env))
    st.warm_during_waits("quay_warm_probe", "json")  # json: already imported, skipped
    assert list(st._warm_ups) == ["quay_warm_probe"]
    st._wait_warming(None, "env")
    for t in [t for t in threading.enumerate() if t.name == "quay-warm-up"]:
        t.join(30)
    assert waited == ["env"]  # and then it waits as moto does
    assert sys.modules["quay_warm_probe"].LOADED
    assert not st._warm_ups
    st._wait_warming(None, "again")  # nothing left to warm: it just waits
    assert waited == ["env", "again"]


def _request(
    target: str | None, body: bytes = b"", url: str = "https://example.amazonaws.com/", method: str = "POST"
) -> SimpleNamespace:
    return SimpleNamespace(headers={"X-Amz-Target": target} if target else {}, body=body, url=url, method=method)


@pytest.mark.unit
def test_a_write_wakes_only_the_pollers_it_can_feed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(st, "_ACTIVE", [SimpleNamespace(_stream_table=b"quayutec-room")])
    room = _request("DynamoDB_20120810.PutItem", b'{"TableName": "quayutec-room", "Item": {}}')
    ledger = _request("DynamoDB_20120810.UpdateItem", b'{"TableName": "quayutec-ledger", "Key": {}}')
    both = _request(
        "DynamoDB_20120810.TransactWriteItems",
        b'{"TransactItems": [{"Put": {"TableName": "quayutec-ledger"}}, {"Update": {"TableName": "quayutec-room"}}]}',
    )
    assert st._pollers_fed(room) == {st.STREAM}
    assert st._pollers_fed(both) == {st.STREAM}
    assert st._pollers_fed(ledger) is None  # an event for wait_quiet, no pump round
    assert st._pollers_fed(_request("AmazonSQS.SendMessageBatch", b"{}")) == {st.QUEUES}
    assert st._pollers_fed(_request(None, url="https://quayutec-files.s3.amazonaws.com/uploads/x", method="PUT")) == {
        st.QUEUES
    }
    assert st._pollers_fed(_request("AWSStepFunctions.SendTaskSuccess", b"{}")) == frozenset()
    assert st._pollers_fed(_request("Something.Else", b"{}")) == st.ALL_POLLERS
    monkeypatch.setattr(st, "_ACTIVE", [SimpleNamespace(_stream_table=None)])  # not started yet
    assert st._pollers_fed(ledger) == {st.STREAM}


@pytest.mark.unit
def test_moto_reads_botocore_models_through_shared_loaders() -> None:
    import boto3
    from moto.core import utils as moto_utils
    from moto.core.base_backend import AccountSpecificBackend

    assert moto_utils.create_loader() is moto_utils.create_loader()
    AccountSpecificBackend.get_session.cache_clear()  # another test may have set a new default session
    session = AccountSpecificBackend.get_session()
    assert session is AccountSpecificBackend.get_session()
    assert session._session.get_component("data_loader") is boto3._get_default_session()._session.get_component(
        "data_loader"
    )
    assert "us-east-1" in session.get_available_regions("dynamodb")
