"""The template and the ASL pass the external checkers: cdk-nag, cfn-lint, asl-validator;
and the deployment settings are validated."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quayutec import resources as R

REPO_ROOT = Path(__file__).resolve().parents[2]
ASL_PATH = REPO_ROOT / "statemachines" / R.STATE_MACHINE_FILE
ASL_VALIDATOR = REPO_ROOT / "node_modules" / ".bin" / "asl-validator"


# --------------------------------------------------------------------------- cdk-nag
def test_cdk_nag_has_no_unacknowledged_findings(assembly):
    report = json.loads((assembly / "validation-report.json").read_text())
    plugins = {p["pluginName"]: p for p in report["pluginReports"]}
    nag = plugins["AwsSolutions"]
    assert nag["conclusion"] == "success"
    assert nag["violations"] == []
    for plugin in plugins.values():
        assert plugin["violations"] == [], plugin["pluginName"]
        for ack in plugin.get("suppressedViolations", []):
            assert len(ack["reason"]) >= 40, ack["acknowledgedId"]  # a reason, not a shrug
    assert nag["suppressedViolations"], "the AwsSolutions pack did not run?"


def test_cdk_nag_catches_an_unacknowledged_finding(tmp_path):
    """The plugin really gates synth: an unencrypted queue without DLQ fails it."""
    from aws_cdk import App, Stack, Validations
    from aws_cdk import aws_sqs as sqs
    from cdk_nag import AwsSolutionsChecks

    app = App(outdir=str(tmp_path))
    stack = Stack(app, "NagProbe")
    sqs.Queue(stack, "Bare", encryption=sqs.QueueEncryption.UNENCRYPTED)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(Exception, match="AwsSolutions-SQS3"):
        app.synth()


# --------------------------------------------------------------------------- cfn-lint
def _cfn_lint(path: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("cfn-lint")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "cfnlint"]
    return subprocess.run(
        [*cmd, "--ignore-checks", "W3005", "--", str(path)], capture_output=True, text=True, timeout=300
    )


def test_cfn_lint_clean(stack_files):
    result = _cfn_lint(stack_files[1])
    assert result.returncode == 0, result.stdout + result.stderr


def test_cfn_lint_catches_a_broken_template(tmp_path, template):
    broken = json.loads(json.dumps(template))
    broken["Resources"]["WakeQueue"]["Properties"]["VisibilityTimeout"] = "soon"
    path = tmp_path / "broken.template.json"
    path.write_text(json.dumps(broken))
    result = _cfn_lint(path)
    assert result.returncode != 0 and "E" in result.stdout


# --------------------------------------------------------------------------- asl-validator
@pytest.fixture(scope="module")
def asl_validator() -> Path:
    """node_modules from package-lock.json (the Makefile runs `npm ci`; here too if missing)."""
    if not ASL_VALIDATOR.exists():
        npm = shutil.which("npm")
        assert npm, "npm is needed for asl-validator (package.json)"
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--silent"], cwd=REPO_ROOT, check=True, timeout=300)
    return ASL_VALIDATOR


def _validate(validator: Path, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(validator), "--json-path", str(path)], capture_output=True, text=True, timeout=120)


def _deployed_asl(tmp_path: Path) -> Path:
    """The ASL as deployed in the aws partition: ``${Partition}`` substituted (asl-validator's
    schema, like cfn-lint's, knows Task Resources as ``arn:aws:...`` only)."""
    path = tmp_path / "deployed.asl.json"
    path.write_text(ASL_PATH.read_text().replace("${" + R.ASL_PARTITION_PLACEHOLDER + "}", "aws"))
    return path


def test_asl_validator_passes_the_asl(asl_validator, tmp_path):
    result = _validate(asl_validator, _deployed_asl(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is valid" in result.stdout


def test_asl_validator_catches_a_bad_transition(asl_validator, tmp_path):
    asl = json.loads(_deployed_asl(tmp_path).read_text())
    first = asl["StartAt"]
    asl["States"][first]["Next"] = "NoSuchState"
    path = tmp_path / "bad.asl.json"
    path.write_text(json.dumps(asl))
    result = _validate(asl_validator, path)
    assert result.returncode != 0
    assert "NoSuchState" in result.stdout + result.stderr


# --------------------------------------------------------------------------- settings
def _settings(**context):
    from aws_cdk import App

    from quayinfra.config import Settings

    return Settings.from_context(App(context=context).node)


@pytest.mark.unit
def test_settings_defaults_and_stage_rules():
    from aws_cdk import RemovalPolicy

    dev = _settings()
    assert dev.stage == "dev" and dev.stack_name == "Quayutec-dev"
    assert dev.removal_policy == RemovalPolicy.DESTROY
    assert dev.runtime == R.SETTING_DEFAULTS
    prod = _settings(stage="prod", hopLimit="6", approvalTimeoutSeconds=3600)
    assert prod.removal_policy == RemovalPolicy.RETAIN
    assert prod.runtime["HOP_LIMIT"] == "6"
    assert prod.runtime["APPROVAL_TIMEOUT_SECONDS"] == "3600"
    assert _settings(stage="prod", removalPolicy="destroy").removal_policy == RemovalPolicy.DESTROY


@pytest.mark.parametrize(
    "context",
    [
        {"approvalTimeoutSeconds": 604801},
        {"approvalTimeoutSeconds": 0},
        {"approvalTimeoutSeconds": 604800, "runTimeLimitSeconds": 86401},
        {"modelTimeoutSeconds": 300},
        {"hopLimit": "-1"},
        {"logRetentionDays": 10},
        {"stage": "no spaces"},
        {"removalPolicy": "maybe"},
        {"secretPrefix": "*"},
        {"recentMessages": "0"},
        {"runDataExpiryDays": 0},
        {"alarmEmail": "not an address"},
    ],
)
@pytest.mark.unit
def test_settings_rejects(context):
    from quayinfra.config import SettingsError

    with pytest.raises(SettingsError):
        _settings(**context)


@pytest.mark.unit
def test_approval_limit_fits_the_asl_execution_timeout():
    from quayinfra.config import MAX_APPROVAL_TIMEOUT_SECONDS, asl_execution_timeout

    limit = int(R.SETTING_DEFAULTS["RUN_TIME_LIMIT_SECONDS"])
    assert MAX_APPROVAL_TIMEOUT_SECONDS + limit <= asl_execution_timeout()
    _settings(approvalTimeoutSeconds=MAX_APPROVAL_TIMEOUT_SECONDS)  # the maximum is allowed
