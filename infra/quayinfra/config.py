"""Deployment settings: CDK context values with defaults, validated once at synth.

Pass them with ``cdk deploy -c stage=prod -c hopLimit=6`` or in ``cdk.json`` under "context".

Infrastructure settings:

=====================  =========  ==========================================================
context key            default    meaning
=====================  =========  ==========================================================
stage                  dev        suffix of the stack name (``Quayutec-<stage>``); "prod"
                                  retains tables, bucket and log groups on delete
removalPolicy          (by stage) "retain" or "destroy": overrides the stage rule
logRetentionDays       30         retention of every Lambda / state-machine log group
                                  (one of CloudWatch's allowed values: 1, 3, 5, 7, 14, 30 ...)
logExecutionData       false      state-machine logs include execution input/output
                                  (ids only, but approval task tokens pass there too)
runDataExpiryDays      30         run data objects (``runs/`` in the run-data bucket)
                                  expire after this many days (a lifecycle rule)
alarmEmail             (none)     an address subscribed (by email) to the alarm topic; AWS
                                  sends a confirmation mail that must be accepted
companyThrottleRate    10         each company's own API throttle, requests per second
                                  (the usage plan's, per API key; docs/design.md §5); at
                                  most the stage's 50
companyThrottleBurst   20         ... and its burst (requests at once), at most the
                                  stage's 100
snapStart              false      Lambda SnapStart on every function: a published version
                                  and a ``live`` alias each, invoked (and granted) through
                                  the alias; CallModel imports the provider SDKs at init
                                  (docs/design.md §10; it has its own charges)
=====================  =========  ==========================================================

Runtime settings: every entry of ``quayutec.resources.SETTING_DEFAULTS`` can be overridden by
the camelCase of its name, e.g. ``approvalTimeoutSeconds`` (APPROVAL_TIMEOUT_SECONDS, default
86400, at most 604800 so that approval + run limit fit the ASL's execution TimeoutSeconds),
``hopLimit`` (8), ``modelTimeoutSeconds`` (120, below CallModel's Lambda timeout),
``runTimeLimitSeconds`` (300), ``recentMessages`` (50), ``memoryLines`` (100),
``filePassages`` (5), ``maxFileChunks`` (100000), ``secretPrefix`` ("quayutec": provider keys
are the secrets ``<secretPrefix>/<stage>/<company>/<provider>``), ``modelPrices`` ("{}": the
cost line's model prices over the built-in ones, ``{"model-id": {"input": 3, "output": 15}}``
in USD per million tokens, a JSON object or its text). STAGE is the ``stage`` above.
The values become the Lambda environment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Node
from pydantic import ValidationError

from quayutec import resources as R
from quayutec import settings as runtime_settings

REPO_ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = REPO_ROOT / "functions"
STATE_MACHINE_PATH = REPO_ROOT / "statemachines" / R.STATE_MACHINE_FILE

# The Lambda target (the layer is built for the same: build_layer.PYTHON_VERSION / PLATFORM).
LAMBDA_RUNTIME = lambda_.Runtime.PYTHON_3_13
LAMBDA_ARCHITECTURE = lambda_.Architecture.ARM_64

# Hard limits of the run (design §2): not settings.
MAX_APPROVAL_TIMEOUT_SECONDS = 604_800  # 7 days

DEFAULT_STAGE = R.DEFAULT_STAGE
DEFAULT_LOG_RETENTION_DAYS = 30
DEFAULT_RUN_DATA_EXPIRY_DAYS = 30

_RETENTION_BY_DAYS: dict[int, logs.RetentionDays] = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


class SettingsError(ValueError):
    """A context value that cannot be deployed."""


def context_key(env_name: str) -> str:
    """APPROVAL_TIMEOUT_SECONDS -> approvalTimeoutSeconds."""
    first, *rest = env_name.lower().split("_")
    return first + "".join(w.capitalize() for w in rest)


def _as_int(key: str, value: Any, *, minimum: int, maximum: int | None = None) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise SettingsError(f"context {key}={value!r}: not an integer") from None
    if number < minimum or (maximum is not None and number > maximum):
        bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise SettingsError(f"context {key}={number}: must be {bound}")
    return number


def _as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise SettingsError(f"context {key}={value!r}: not a boolean")


def asl_execution_timeout(path: Path = STATE_MACHINE_PATH) -> int:
    return int(json.loads(path.read_text())["TimeoutSeconds"])


@dataclass(frozen=True)
class Settings:
    stage: str
    removal_policy: RemovalPolicy
    log_retention_days: int
    log_execution_data: bool
    runtime: dict[str, str]  # SETTING_DEFAULTS names -> values (the Lambda environment)
    run_data_expiry_days: int = DEFAULT_RUN_DATA_EXPIRY_DAYS
    alarm_email: str | None = None
    snap_start: bool = False
    company_throttle_rate: int = R.DEFAULT_COMPANY_THROTTLE_RATE
    company_throttle_burst: int = R.DEFAULT_COMPANY_THROTTLE_BURST

    @property
    def stack_name(self) -> str:
        return f"Quayutec-{self.stage}"

    @property
    def log_retention(self) -> logs.RetentionDays:
        return _RETENTION_BY_DAYS[self.log_retention_days]

    @property
    def secret_prefix(self) -> str:
        return self.runtime[R.SECRET_PREFIX_ENV]

    @classmethod
    def from_context(cls, node: Node) -> Settings:
        def get(key: str, default: Any) -> Any:
            value = node.try_get_context(key)
            return default if value is None else value

        stage = str(get("stage", DEFAULT_STAGE)).strip()
        if not stage or not all(c.isalnum() or c == "-" for c in stage):
            raise SettingsError(f"context stage={stage!r}: letters, digits and '-' only")

        policy_name = str(get("removalPolicy", "retain" if stage == "prod" else "destroy"))
        policies = {"retain": RemovalPolicy.RETAIN, "destroy": RemovalPolicy.DESTROY}
        if policy_name.lower() not in policies:
            raise SettingsError(f"context removalPolicy={policy_name!r}: retain | destroy")

        days = _as_int("logRetentionDays", get("logRetentionDays", DEFAULT_LOG_RETENTION_DAYS), minimum=1)
        if days not in _RETENTION_BY_DAYS:
            raise SettingsError(f"context logRetentionDays={days}: one of {sorted(_RETENTION_BY_DAYS)}")

        # A JSON setting (MODEL_PRICES) may be given as an object in cdk.json: its JSON text.
        runtime = {
            name: (json.dumps(v) if isinstance(v := get(context_key(name), default), (dict, list)) else str(v))
            for name, default in R.SETTING_DEFAULTS.items()
        }
        runtime[R.STAGE_ENV] = stage  # secret names carry the stage (design §5)
        cls._validate_runtime(runtime)
        expiry = _as_int("runDataExpiryDays", get("runDataExpiryDays", DEFAULT_RUN_DATA_EXPIRY_DAYS), minimum=1)
        email = str(get("alarmEmail", "")).strip() or None
        if email is not None and ("@" not in email or any(c.isspace() for c in email)):
            raise SettingsError(f"context alarmEmail={email!r}: an email address")
        rate = _as_int(
            "companyThrottleRate",
            get("companyThrottleRate", R.DEFAULT_COMPANY_THROTTLE_RATE),
            minimum=1,
            maximum=R.STAGE_THROTTLE_RATE,
        )
        burst = _as_int(
            "companyThrottleBurst",
            get("companyThrottleBurst", R.DEFAULT_COMPANY_THROTTLE_BURST),
            minimum=1,
            maximum=R.STAGE_THROTTLE_BURST,
        )
        return cls(
            stage=stage,
            removal_policy=policies[policy_name.lower()],
            log_retention_days=days,
            log_execution_data=_as_bool("logExecutionData", get("logExecutionData", False)),
            runtime=runtime,
            run_data_expiry_days=expiry,
            alarm_email=email,
            snap_start=_as_bool("snapStart", get("snapStart", False)),
            company_throttle_rate=rate,
            company_throttle_burst=burst,
        )

    @staticmethod
    def _validate_runtime(runtime: dict[str, str]) -> None:
        """Each value through the runtime's settings model, then the relations it cannot see."""
        try:
            model = runtime_settings.validate_settings(runtime)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                name = str(err["loc"][0]) if err["loc"] else "?"
                problems.append(f"context {context_key(name)}={runtime.get(name)!r} ({name}): {err['msg']}")
            raise SettingsError("; ".join(problems)) from None
        execution_timeout = asl_execution_timeout()
        if model.approval_timeout_s + model.run_time_limit_s > execution_timeout:
            raise SettingsError(
                f"context approvalTimeoutSeconds + runTimeLimitSeconds = "
                f"{model.approval_timeout_s + model.run_time_limit_s} exceeds the state "
                f"machine's TimeoutSeconds {execution_timeout}"
            )
        call_model = R.FUNCTIONS_BY_ID["CallModelFunction"].timeout_s
        if model.model_timeout_s >= call_model:
            raise SettingsError(
                f"context modelTimeoutSeconds={runtime['MODEL_TIMEOUT_SECONDS']!r}: must be below "
                f"CallModelFunction's Lambda timeout ({call_model} s)"
            )
        prefix = model.secret_prefix
        if not prefix or "*" in prefix or prefix.startswith("/") or prefix.endswith("/"):
            raise SettingsError(f"context secretPrefix={prefix!r}: a plain name prefix")
