"""Run engine (design §2): the agent-run state machine over the phase functions.

The definition is the ASL file itself (``statemachines/agent_run.asl.json``), unchanged; the
Lambda ARNs are definition substitutions built from ``FunctionDef.asl_placeholder``.
"""

from __future__ import annotations

import re
from typing import cast

from aws_cdk import Acknowledgment, Aws, Fn, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from quayutec import resources as R

from . import checkov, nag
from .config import STATE_MACHINE_PATH, Settings
from .functions import LOG_GROUP_CMK_REASON, XRAY_REASON, Functions

STATE_MACHINE_LOGICAL_ID = R.STATE_MACHINE_LOGICAL_ID
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


ANY_DOLLAR_BRACES = re.compile(r"\$\{([^}]*)\}")


def stack_id_suffix() -> str:
    """The last group of the stack id's UUID: new for every creation of the stack."""
    uuid = Fn.select(2, Fn.split("/", Aws.STACK_ID))
    return Fn.select(4, Fn.split("-", uuid))


def asl_placeholders(text: str | None = None) -> set[str]:
    text = STATE_MACHINE_PATH.read_text() if text is None else text
    return set(PLACEHOLDER.findall(text))


class RunEngine(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, functions: Functions) -> None:
        super().__init__(scope, construct_id)
        phases = [f for f in R.FUNCTIONS if f.asl_placeholder]
        # The functions' ARNs, or with SnapStart their aliases' (qualified) ones: Functions.target
        substitutions = {f.asl_placeholder: functions.target(f).function_arn for f in R.FUNCTIONS if f.asl_placeholder}
        # Service integration ARNs name no partition literally (aws, aws-cn, aws-us-gov).
        substitutions[R.ASL_PARTITION_PLACEHOLDER] = Aws.PARTITION
        missing = asl_placeholders() - set(substitutions)
        unused = set(substitutions) - asl_placeholders()
        if missing or unused:
            raise ValueError(
                f"ASL placeholders without a function: {sorted(missing)}; "
                f"functions whose placeholder is not in the ASL: {sorted(unused)}"
            )

        self.log_group = logs.LogGroup(
            self,
            "StateMachineLogs",
            # Under /aws/vendedlogs/ (keeps the account's CloudWatch Logs resource policy
            # small), ending in a piece of the stack id: a retained (prod) group never blocks
            # re-creating the stack after `cdk destroy`.
            log_group_name=Fn.join("", [f"/aws/vendedlogs/states/{settings.stack_name}-agent-run-", stack_id_suffix()]),
            retention=settings.log_retention,
            removal_policy=settings.removal_policy,
        )
        checkov.acknowledge(self.log_group, "CKV_AWS_158", LOG_GROUP_CMK_REASON)
        self.state_machine = sfn.StateMachine(
            self,
            "AgentRun",
            state_machine_type=sfn.StateMachineType.STANDARD,
            # The ASL file, inline (DefinitionString), not DefinitionBody.from_file: that one
            # ships the file as an S3 asset (DefinitionS3Location), which hides ASL changes
            # from `cdk diff` and which moto's CloudFormation ignores (empty definition).
            definition_body=sfn.DefinitionBody.from_string(STATE_MACHINE_PATH.read_text()),
            definition_substitutions=substitutions,
            logs=sfn.LogOptions(
                destination=self.log_group,
                level=sfn.LogLevel.ALL,
                include_execution_data=settings.log_execution_data,
            ),
            tracing_enabled=True,
        )
        cfn_state_machine = cast(sfn.CfnStateMachine, self.state_machine.node.default_child)
        cfn_state_machine.override_logical_id(STATE_MACHINE_LOGICAL_ID)
        self._lint_ignores: dict[str, str] = {}
        # cfn-lint's state machine schema (E3601) accepts service integration ARNs of the aws
        # partition only; the ASL writes "arn:${Partition}:states:::..." (a substitution).
        self._lint_ignores["E3601"] = (
            "cfn-lint's definition schema matches Task Resources against ARNs of the aws "
            "partition only; the ASL names the partition through the ${Partition} "
            "DefinitionSubstitution (AWS::Partition). The definition is checked by "
            "asl-validator (tests/infra) instead."
        )
        self._allow_literal_dollar_braces(set(substitutions))
        cfn_state_machine.add_metadata(
            "cfn-lint",
            {
                "config": {"ignore_checks": sorted(self._lint_ignores)},
                "reason": " ".join(f"{k}: {v}" for k, v in sorted(self._lint_ignores.items())),
            },
        )
        # Invoke exactly the phase functions, as the ASL names them (unqualified ARNs, or with
        # SnapStart the "live" aliases' qualified ones): no "<arn>:*" version wildcard, as
        # fn.grant_invoke would add.
        self.state_machine.add_to_role_policy(
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"],
                resources=[functions.target(f).function_arn for f in phases],
            )
        )
        nag.acknowledge(
            self.state_machine,
            "IAM5",
            "Logging to CloudWatch Logs (logs:CreateLogDelivery, GetLogDelivery, "
            "UpdateLogDelivery, DeleteLogDelivery, ListLogDeliveries, PutResourcePolicy, "
            "DescribeResourcePolicies, DescribeLogGroups) and X-Ray tracing "
            "(xray:PutTraceSegments, PutTelemetryRecords, GetSamplingRules, "
            "GetSamplingTargets) support no resource-level permissions: AWS requires Resource "
            "'*' (https://docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html). " + XRAY_REASON,
            "Resource::*",
        )

    def _allow_literal_dollar_braces(self, keys: set[str]) -> None:
        """``${...}`` in the ASL that is no substitution key (text in a Comment) makes
        cfn-lint and CDK's template check report E1029 (embedded parameter outside Fn::Sub).
        Step Functions leaves such text alone, so acknowledge it on this resource only,
        and only while the ASL has such text."""
        stray = sorted(set(ANY_DOLLAR_BRACES.findall(STATE_MACHINE_PATH.read_text())) - keys)
        if not stray:
            return
        reason = (
            f"Literal {', '.join('${' + s + '}' for s in stray)} in the ASL text (not a "
            "placeholder); the real placeholders are DefinitionSubstitutions."
        )
        Validations.of(self.state_machine).acknowledge(
            Acknowledgment(id="CloudFormation-Validate::E1029", reason=reason)
        )
        self._lint_ignores["E1029"] = reason
