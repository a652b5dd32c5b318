"""The whole suite: every AWS call the deployed code makes is checked against its role in the
synthesized template (design §11; :mod:`quaylocal.calls`, :mod:`quaylab.iam_check`).

* Every function's handler is wrapped so the calls it makes are owned by that function; the
  test's own thread is ``setup``; the local stack's pollers own their calls as the function they
  stand in for; moto's Step Functions interpreter invokes Lambdas as the state machine's role.
* After each test, its calls are checked: a call the owner's role would deny, an unowned call or
  an operation missing from ``quaylocal.calls.OPERATIONS`` fails the test, naming function,
  action and resource.
* At the end of the session the grants no call used are listed; with ``QUAY_IAM_FULL=1`` (set by
  ``make test``, which runs the whole suite) an unused grant without a reason in
  ``quaylab.iam_check.UNUSED_GRANT_REASONS`` fails the run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
for _path in (REPO_ROOT / "infra", REPO_ROOT / "functions"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from quaylab import iam_check  # noqa: E402
from quaylocal import calls as C  # noqa: E402

RECORDER = C.Recorder()
C.install(RECORDER)
# The quay processes the tests start (quay dev, quay demo) record into this file.
CALL_LOG = Path(os.environ.get("TMPDIR", "/tmp")) / f"quay-calls-{os.getpid()}.jsonl"
os.environ[C.CALL_LOG_ENV] = str(CALL_LOG)
CALL_LOG.unlink(missing_ok=True)
_call_log_offset = 0
FULL = os.environ.get("QUAY_IAM_FULL") == "1"


C.own_handlers()
# The suite's main thread is set-up unless a handler (or a poller) owns the call; threads the
# tests start carry no owner unless they copy the context (calls there are refused as unowned).
C.OWNER.set(C.SETUP)


# ----------------------------------------------------------------------------- the unit tier
UNIT = "unit"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{UNIT}: no AWS (not even moto) and no network; `make unit` runs these alone (sockets off "
        "through pytest-socket, every botocore API call refused)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker(UNIT) is not None:
            item.add_marker(pytest.mark.disable_socket)  # pytest-socket: no socket but Unix ones


class AwsCallInUnitTest(AssertionError):
    """A test marked ``unit`` made an AWS API call (moto's included): it belongs to the full tier."""


@pytest.fixture(autouse=True)
def _no_aws_in_unit_tests(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker(UNIT) is None:
        return
    from botocore.client import BaseClient

    def refuse(self: Any, operation_name: str, api_params: Any) -> Any:
        raise AwsCallInUnitTest(
            f"{self.meta.service_model.service_name}.{operation_name} in a test marked {UNIT!r}: "
            "unit tests make no AWS call; drop the marker or the call"
        )

    monkeypatch.setattr(BaseClient, "_make_api_call", refuse)


# ----------------------------------------------------------------------------- the template
def _infra_conftest() -> Any:
    spec = importlib.util.spec_from_file_location("quay_infra_conftest", REPO_ROOT / "tests" / "infra" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def shared_assembly(config: pytest.Config) -> Path:
    """The cloud assembly ``cdk synth`` makes (the deployed template), once per session and
    shared by xdist workers (the same directory as tests/infra's ``assembly`` fixture)."""
    return _infra_conftest().session_assembly(config._tmp_path_factory)  # type: ignore[attr-defined]


_ROLES: iam_check.Roles | None = None


def roles(config: pytest.Config) -> iam_check.Roles:
    global _ROLES
    if _ROLES is None:
        from quayinfra.localdeploy import stack_artifact

        _name, template_path, _assets = stack_artifact(shared_assembly(config))
        _ROLES = iam_check.Roles(json.loads(template_path.read_text()))
    return _ROLES


# ----------------------------------------------------------------------------- per test
_USED: set[tuple[str, int, str, str]] = set()
_PAIRS: set[tuple[str, str, str]] = set()  # (owner, action, resource) of every checked call


@pytest.fixture
def iam_roles(request: pytest.FixtureRequest) -> iam_check.Roles:
    """The roles of the synthesized template the suite checks against."""
    return roles(request.config)


@pytest.fixture
def recorded_calls() -> Any:
    """``recorded_calls()``: the calls recorded so far in this test (the checker's own tests)."""
    return lambda: list(RECORDER.calls)


@pytest.fixture(autouse=True)
def _iam_check_each_call(request: pytest.FixtureRequest) -> Any:
    # Calls since the last check (module fixtures, threads of earlier tests) are checked here too.
    global _call_log_offset
    yield
    recorded = RECORDER.take()
    others, _call_log_offset = C.read_call_log(str(CALL_LOG), _call_log_offset)
    recorded += others
    if not any(
        (c.owner and c.owner.startswith("function:")) or c.owner == C.STATE_MACHINE or c.owner is None or c.unmapped
        for c in recorded
    ):
        return
    checker = roles(request.config)
    denials, problems = checker.check(recorded)
    _USED.update(checker.used(recorded))
    _PAIRS.update((c.owner, a, res) for c in recorded if c.owner in checker.role_of for a, res in c.pairs)
    lines = [f"denied: {d}" for d in dict.fromkeys(map(str, denials))]
    lines += [
        f"cannot check ({'unmapped operation' if c.unmapped else 'no owner/role'}): {c.describe()}"
        for c in dict.fromkeys(problems)
    ]
    if lines:
        pytest.fail(
            "AWS calls the synthesized template's roles would not allow (design §11):\n  " + "\n  ".join(lines[:40]),
            pytrace=False,
        )


# ----------------------------------------------------------------------------- the session
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workerinput"):  # an xdist worker: hand the used grants to the controller
        config.workeroutput["iam_used"] = json.dumps(sorted(_USED))  # type: ignore[attr-defined]
        config.workeroutput["iam_pairs"] = json.dumps(sorted(_PAIRS))  # type: ignore[attr-defined]
        return
    if not FULL:
        return
    report = iam_check.unused_report(roles(config), _USED)
    out = REPO_ROOT / ".pytest_cache" / "iam-report.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text(report.text)
    (out.parent / "iam-calls.txt").write_text("".join(f"{o}: {a} on {res}\n" for o, a, res in sorted(_PAIRS)))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_sep("=", "IAM: grants no recorded call used (information, not failures)")
        reporter.write_line(report.text)
    if report.unexplained and session.exitstatus == 0:
        session.exitstatus = 1


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: merge what each worker's calls used."""
    out = getattr(node, "workeroutput", {})
    for row in json.loads(out.get("iam_used", "[]")):
        _USED.add(tuple(row))  # type: ignore[arg-type]
    for row in json.loads(out.get("iam_pairs", "[]")):
        _PAIRS.add(tuple(row))  # type: ignore[arg-type]
