"""The room API (issue 4): API Gateway REST API -> the ApiFunction (Lambda proxy integration),
behind a TOKEN Lambda authorizer (the AuthorizerFunction: bearer tokens stored hashed, design §5),
one stage with JSON access logs, X-Ray tracing, metrics and throttling: the stage's throttle is
the overall cap, and one usage plan throttles each company on its own (docs/design.md §5).

* ``ANY /{proxy+}``: every API route, authorizer required (the handler trusts only the
  authorizer's context ``{company, member, admin}``) and an API key required: the REST API takes
  keys from the authorizer (``apiKeySource: AUTHORIZER``), which answers the caller's company's
  key as ``usageIdentifierKey``; the usage plan's throttle applies per key.
* The public routes of :data:`quayutec.api.public.PUBLIC_ROUTES` (the OpenAPI document, Swagger
  UI and the room page's static files at ``/app/``), no authorizer: defined once, for this app
  and ``quay dev``. Every data call of the page carries the bearer token.

The functions come from the factory (``Functions``, from ``resources.FUNCTIONS``); what the API
role needs beyond its ``touches`` is granted here: answer approval task tokens of the state
machine. (Setting/rotating provider keys is its "secrets:write" touch.)
"""

from __future__ import annotations

from typing import cast

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from quayutec import resources as R
from quayutec.api.public import PUBLIC_ROUTES

from . import checkov, nag
from .config import Settings
from .functions import LOG_GROUP_CMK_REASON, Functions
from .storage import Storage

AUTHORIZER_CACHE_TTL = Duration.minutes(5)  # a revoked token stops working within this
THROTTLE_RATE = R.STAGE_THROTTLE_RATE  # requests per second, steady: every caller together
THROTTLE_BURST = R.STAGE_THROTTLE_BURST

# API Gateway's own answers (no Lambda reached) in the API's error shape
# ({"error": code, "message": text, "fields": []}, quayutec/api/errors.py): response type ->
# (status, error code). Codes and statuses are those of the API's one error table
# (quayutec.api.errors.ERRORS, docs/api.md; a test holds them together).
GATEWAY_RESPONSES: dict[str, tuple[str, str]] = {
    "DEFAULT_4XX": ("400", "bad_request"),
    "DEFAULT_5XX": ("500", "internal_error"),
    "UNAUTHORIZED": ("401", "unauthenticated"),
    "ACCESS_DENIED": ("403", "forbidden"),
    "EXPIRED_TOKEN": ("401", "unauthenticated"),
    "INVALID_API_KEY": ("403", "forbidden"),
    # No such resource/method: API Gateway says 403 "Missing Authentication Token"; the API
    # answers an unknown route with 404.
    "MISSING_AUTHENTICATION_TOKEN": ("404", "not_found"),
    "RESOURCE_NOT_FOUND": ("404", "not_found"),
    "REQUEST_TOO_LARGE": ("413", "payload_too_large"),
    "BAD_REQUEST_PARAMETERS": ("400", "invalid_input"),
    "BAD_REQUEST_BODY": ("400", "invalid_input"),
    "UNSUPPORTED_MEDIA_TYPE": ("415", "unsupported_media_type"),
    "THROTTLED": ("429", "throttled"),
    "QUOTA_EXCEEDED": ("429", "throttled"),
    "INTEGRATION_FAILURE": ("502", "bad_gateway"),
    "INTEGRATION_TIMEOUT": ("504", "gateway_timeout"),
    "AUTHORIZER_FAILURE": ("500", "internal_error"),
    "AUTHORIZER_CONFIGURATION_ERROR": ("500", "internal_error"),
}
RETRY_AFTER = {"429": "1", "502": "1", "504": "1"}


def gateway_response_template(code: str) -> str:
    """The body API Gateway sends: $context.error.messageString is already a quoted JSON string."""
    return '{"error": "' + code + '", "message": $context.error.messageString, "fields": []}'


class Api(Construct):
    def _usage_plan(self, settings: Settings, functions: Functions) -> None:
        """The stage's one usage plan, throttling each API key (each company) on its own
        (``companyThrottleRate`` / ``companyThrottleBurst``), and the shared key of operators and
        of companies created before companies had keys. The ApiFunction finds the plan by its
        name (an id in its environment would make it depend on the stage, which depends on it)
        and puts each new company's key in it; the authorizer reads the shared key's value."""
        self.usage_plan = self.rest_api.add_usage_plan(
            "UsagePlan",
            name=R.usage_plan_name(settings.stage),
            description="quayutec: each company's API key throttled on its own (docs/design.md §5)",
            throttle=apigw.ThrottleSettings(
                rate_limit=settings.company_throttle_rate, burst_limit=settings.company_throttle_burst
            ),
            api_stages=[apigw.UsagePlanPerApiStage(api=self.rest_api, stage=self.rest_api.deployment_stage)],
        )
        cast(apigw.CfnUsagePlan, self.usage_plan.node.default_child).override_logical_id(R.USAGE_PLAN_LOGICAL_ID)
        self.shared_key = apigw.ApiKey(
            self,
            "SharedKey",
            api_key_name=R.shared_api_key_name(settings.stage),
            description="quayutec: operators and companies without a key of their own (docs/design.md §5)",
            enabled=True,
        )
        cast(apigw.CfnApiKey, self.shared_key.node.default_child).override_logical_id(R.SHARED_API_KEY_LOGICAL_ID)
        self.usage_plan.add_api_key(self.shared_key)

        stack = Stack.of(self)

        def arn(path: str) -> str:
            return f"arn:{stack.partition}:apigateway:{stack.region}::{path}"

        api_fn, authorizer_fn = functions["ApiFunction"], functions["AuthorizerFunction"]
        api_fn.add_environment(R.USAGE_PLAN_NAME_ENV, R.usage_plan_name(settings.stage))
        authorizer_fn.add_environment(R.SHARED_API_KEY_ID_ENV, self.shared_key.key_id)
        # Policies of their own: on a function's default policy the plan's id would make the
        # function depend on the stage that invokes it.
        iam.Policy(
            self,
            "CompanyKeysPolicy",
            roles=[functions.roles["ApiFunction"]],
            statements=[
                iam.PolicyStatement(actions=["apigateway:GET"], resources=[arn("/usageplans"), arn("/apikeys")]),
                iam.PolicyStatement(
                    actions=["apigateway:POST"],
                    resources=[arn("/apikeys"), arn(f"/usageplans/{self.usage_plan.usage_plan_id}/keys")],
                ),
            ],
        )
        iam.Policy(
            self,
            "SharedKeyPolicy",
            roles=[functions.roles["AuthorizerFunction"]],
            statements=[
                iam.PolicyStatement(actions=["apigateway:GET"], resources=[arn(f"/apikeys/{self.shared_key.key_id}")])
            ],
        )

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        storage: Storage,
        functions: Functions,
        state_machine: sfn.IStateMachine,
    ) -> None:
        super().__init__(scope, construct_id)
        # The idempotency table is granted through the ApiFunction's "idempotency:write" touch
        # (Functions), like every other table.
        self.storage = storage
        # The functions, or with SnapStart their "live" aliases (the permissions API Gateway gets
        # name what it invokes)
        api_fn = functions.target(R.FUNCTIONS_BY_ID["ApiFunction"])
        authorizer_fn = functions.target(R.FUNCTIONS_BY_ID["AuthorizerFunction"])

        # -------------------------------------------------------------- what touches do not name
        # (Provider keys: the ApiFunction's "secrets:write" touch, Functions.)
        # (Task token answers: the ApiFunction's "states:answer" touch, Functions.bind_state_machine.)

        # -------------------------------------------------------------- the REST API
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=settings.log_retention, removal_policy=settings.removal_policy
        )
        self.authorizer = apigw.TokenAuthorizer(
            self,
            "BearerAuthorizer",
            handler=authorizer_fn,
            identity_source=apigw.IdentitySource.header("Authorization"),
            results_cache_ttl=AUTHORIZER_CACHE_TTL,
        )
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            rest_api_name=f"quayutec-{settings.stage}",
            description="Quayutec room API: rooms, members, agents, messages, tasks, memory, approvals, runs",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # Access logging needs the account's API Gateway CloudWatch role (a per-region
            # account setting): without it the first deploy fails at the stage ("CloudWatch
            # Logs role ARN must be set in account settings"). The stack sets it
            # (AWS::ApiGateway::Account + a role with AmazonAPIGatewayPushToCloudWatchLogs) and
            # retains the role, so destroying one stage never breaks another stage's logging.
            cloud_watch_role=True,
            cloud_watch_role_removal_policy=RemovalPolicy.RETAIN,
            deploy_options=apigw.StageOptions(
                stage_name=settings.stage,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                tracing_enabled=True,
                metrics_enabled=True,
                throttling_rate_limit=THROTTLE_RATE,
                throttling_burst_limit=THROTTLE_BURST,
            ),
            default_method_options=apigw.MethodOptions(
                authorization_type=apigw.AuthorizationType.CUSTOM, authorizer=self.authorizer
            ),
            # Each company's requests carry its own API key, from the authorizer (design §5)
            api_key_source_type=apigw.ApiKeySourceType.AUTHORIZER,
        )
        checkov.acknowledge(self.access_logs, "CKV_AWS_158", LOG_GROUP_CMK_REASON)
        checkov.acknowledge(
            self.rest_api.deployment_stage,
            "CKV_AWS_120",
            "No stage cache: answers are per caller (bearer token) and change with every post; a cache "
            "would serve stale or another caller's data",
        )
        self.validator = self.rest_api.add_request_validator(
            "RequestValidator", validate_request_parameters=True, validate_request_body=False
        )
        integration = apigw.LambdaIntegration(api_fn, proxy=True, timeout=Duration.seconds(29))
        proxy = self.rest_api.root.add_proxy(any_method=False)  # (any_method would also put a MOCK on "/")
        proxy.add_method(
            "ANY",
            integration,
            authorization_type=apigw.AuthorizationType.CUSTOM,
            authorizer=self.authorizer,
            request_validator=self.validator,
            request_parameters={"method.request.header.Authorization": True},
            api_key_required=True,  # the authorizer's usageIdentifierKey: the usage plan's throttle
        )
        self._usage_plan(settings, functions)
        for http_method, path in PUBLIC_ROUTES:
            method = self.rest_api.root.resource_for_path(path).add_method(
                http_method, integration, authorization_type=apigw.AuthorizationType.NONE, authorizer=None
            )
            checkov.acknowledge(
                method,
                "CKV_AWS_59",
                "The OpenAPI document, Swagger UI, the room page's static files and the root's redirect to "
                "it hold no data: public on purpose; every data route requires the bearer-token authorizer",
            )
            nag.acknowledge(
                method,
                "APIG4",
                "The OpenAPI document, Swagger UI and the room page's static files hold no data: public "
                "on purpose; every data route (and every call the page makes) requires the bearer-token "
                "authorizer.",
            )
            nag.acknowledge(
                method,
                "COG4",
                "The OpenAPI document, Swagger UI and the room page's static files are public on purpose "
                "(no data); every other route uses the Lambda authorizer.",
            )
        for type_name, (status, code) in GATEWAY_RESPONSES.items():
            headers = {"Content-Type": "'application/json'"}
            if status in RETRY_AFTER:
                headers["Retry-After"] = f"'{RETRY_AFTER[status]}'"
            self.rest_api.add_gateway_response(
                f"{type_name}Response",
                type=apigw.ResponseType.of(type_name),
                status_code=status,
                response_headers=headers,
                templates={"application/json": gateway_response_template(code)},
            )
        cw_role = self.rest_api.node.try_find_child("CloudWatchRole")
        if cw_role is not None:
            nag.acknowledge(
                cw_role,
                "IAM4",
                "API Gateway's account-level CloudWatch role: AWS documents the managed policy "
                "AmazonAPIGatewayPushToCloudWatchLogs for it (the service writes every API's "
                "execution and access logs of the region through this one role, so no "
                "narrower resource is known here).",
                "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs",
            )

        nag.acknowledge(
            self.rest_api,
            "APIG2",
            "Requests are validated in the API function against the pydantic models of the served "
            "OpenAPI document (422 naming the field); the gateway validator checks the Authorization "
            "header only, as bodies are proxied.",
        )
        nag.acknowledge(
            self.rest_api,
            "APIG3",
            "No WAF web ACL in this stack: every route needs a bearer token checked by the Lambda "
            "authorizer, and the stage throttles (rate and burst). Attach an account WAF ACL to the "
            "stage where one exists.",
        )
        nag.acknowledge(
            self.rest_api,
            "APIG6",
            "Execution logging (per-method INFO/ERROR logs of the gateway itself) is left off: "
            "every request is in the stage's JSON access log (status, path, latency, caller) and "
            "the API function logs each one with its error. The account CloudWatch role this "
            "stack sets (cloud_watch_role) lets an operator turn it on for the stage when "
            "debugging the gateway.",
        )
        nag.acknowledge(
            self.rest_api,
            "COG4",
            "Callers are companies' people with bearer tokens stored hashed and checked by a Lambda "
            "authorizer (design §5), not Cognito users.",
        )

        self.url_output = CfnOutput(
            self, "Url", value=self.rest_api.url, description="The room API's base URL (the stage)"
        )
        self.url_output.override_logical_id("ApiUrl")
