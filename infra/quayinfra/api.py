"""The room API (issue 4): API Gateway REST API -> the ApiFunction (Lambda proxy integration),
behind a TOKEN Lambda authorizer (the AuthorizerFunction: bearer tokens stored hashed, SPEC §5),
one stage with JSON access logs, X-Ray tracing, metrics and throttling.

* ``ANY /{proxy+}``: every API route, authorizer required (the handler trusts only the
  authorizer's context ``{company, member, admin}``).
* ``GET /openapi.json`` and ``GET /docs``: the OpenAPI document and Swagger UI, public.

The functions come from the factory (``Functions``, from ``resources.FUNCTIONS``); what the API
role needs beyond its ``touches`` is granted here: set/rotate provider keys in Secrets Manager
(under the secret prefix only) and answer approval task tokens of the state machine.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, CfnOutput, Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from quayutec import resources as R

from . import nag
from .config import Settings
from .functions import Functions
from .storage import Storage

PUBLIC_PATHS = ("openapi.json", "docs")
AUTHORIZER_CACHE_TTL = Duration.minutes(5)  # a revoked token stops working within this
THROTTLE_RATE = 50  # requests per second, steady
THROTTLE_BURST = 100


class Api(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, storage: Storage,
                 functions: Functions, state_machine: sfn.IStateMachine) -> None:
        super().__init__(scope, construct_id)
        # The idempotency table is granted through the ApiFunction's "idempotency:write" touch
        # (Functions), like every other table.
        self.storage = storage
        api_fn = functions[R.FUNCTIONS_BY_ID["ApiFunction"]]
        authorizer_fn = functions[R.FUNCTIONS_BY_ID["AuthorizerFunction"]]
        api_role = functions.roles["ApiFunction"]

        # -------------------------------------------------------------- what touches do not name
        stack = Stack.of(self)
        prefix = settings.secret_prefix
        api_role.add_to_policy(iam.PolicyStatement(
            actions=["secretsmanager:CreateSecret", "secretsmanager:PutSecretValue",
                     "secretsmanager:DescribeSecret"],
            resources=[stack.format_arn(service="secretsmanager", resource="secret",
                                        resource_name=f"{prefix}/*", arn_format=ArnFormat.COLON_RESOURCE_NAME)],
        ))
        nag.acknowledge(
            api_role, "IAM5",
            f"Registering an agent sets or rotates its company's provider key, one secret per company "
            f"and provider under '{prefix}/' (SPEC §5): the names are not known at deploy time, the "
            f"prefix is the narrowest scope.",
            f"Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:{prefix}/*")
        state_machine.grant_task_response(api_role)  # approve / deny a held action (SendTaskSuccess/Failure)

        # -------------------------------------------------------------- the REST API
        self.access_logs = logs.LogGroup(self, "AccessLogs", retention=settings.log_retention,
                                         removal_policy=settings.removal_policy)
        self.authorizer = apigw.TokenAuthorizer(
            self, "BearerAuthorizer", handler=authorizer_fn,
            identity_source=apigw.IdentitySource.header("Authorization"),
            results_cache_ttl=AUTHORIZER_CACHE_TTL,
        )
        self.rest_api = apigw.RestApi(
            self, "RestApi",
            rest_api_name=f"quayutec-{settings.stage}",
            description="Quayutec room API: rooms, members, agents, messages, tasks, memory, approvals, runs",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            cloud_watch_role=False,  # the account-wide logging role is not this stack's to own
            deploy_options=apigw.StageOptions(
                stage_name=settings.stage,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False, http_method=True, ip=True, protocol=True, request_time=True,
                    resource_path=True, response_length=True, status=True, user=True),
                tracing_enabled=True,
                metrics_enabled=True,
                throttling_rate_limit=THROTTLE_RATE,
                throttling_burst_limit=THROTTLE_BURST,
            ),
            default_method_options=apigw.MethodOptions(
                authorization_type=apigw.AuthorizationType.CUSTOM, authorizer=self.authorizer),
        )
        self.validator = self.rest_api.add_request_validator(
            "RequestValidator", validate_request_parameters=True, validate_request_body=False)
        integration = apigw.LambdaIntegration(api_fn, proxy=True, timeout=Duration.seconds(29))
        proxy = self.rest_api.root.add_proxy(any_method=False)  # (any_method would also put a MOCK on "/")
        proxy.add_method("ANY", integration, authorization_type=apigw.AuthorizationType.CUSTOM,
                         authorizer=self.authorizer, request_validator=self.validator,
                         request_parameters={"method.request.header.Authorization": True})
        for path in PUBLIC_PATHS:
            method = self.rest_api.root.add_resource(path).add_method(
                "GET", integration, authorization_type=apigw.AuthorizationType.NONE, authorizer=None)
            nag.acknowledge(
                method, "APIG4",
                "The OpenAPI document and Swagger UI describe the API and hold no data: public on "
                "purpose; every other route requires the bearer-token authorizer.")
            nag.acknowledge(
                method, "COG4",
                "The OpenAPI document and Swagger UI are public on purpose (no data); every other route "
                "uses the Lambda authorizer.")
        for response_type, status in ((apigw.ResponseType.UNAUTHORIZED, "401"),
                                      (apigw.ResponseType.ACCESS_DENIED, "403")):
            self.rest_api.add_gateway_response(
                f"{response_type.response_type}Response", type=response_type, status_code=status,
                templates={"application/json": '{"error": "unauthenticated", "message": $context.error.messageString}'
                           if status == "401" else
                           '{"error": "forbidden", "message": $context.error.messageString}'})

        nag.acknowledge(
            self.rest_api, "APIG2",
            "Requests are validated in the API function against the pydantic models of the served "
            "OpenAPI document (422 naming the field); the gateway validator checks the Authorization "
            "header only, as bodies are proxied.")
        nag.acknowledge(
            self.rest_api, "APIG3",
            "No WAF web ACL in this stack: every route needs a bearer token checked by the Lambda "
            "authorizer, and the stage throttles (rate and burst). Attach an account WAF ACL to the "
            "stage where one exists.")
        nag.acknowledge(
            self.rest_api, "APIG6",
            "Execution logging needs the account-wide API Gateway CloudWatch role "
            "(AWS::ApiGateway::Account), a per-region singleton this stack must not own; every request "
            "is in the JSON access log and the API function logs each one.")
        nag.acknowledge(
            self.rest_api, "COG4",
            "Callers are companies' people with bearer tokens stored hashed and checked by a Lambda "
            "authorizer (SPEC §5), not Cognito users.")

        self.url_output = CfnOutput(self, "Url", value=self.rest_api.url,
                                    description="The room API's base URL (the stage)")
        self.url_output.override_logical_id("ApiUrl")
