"""The one stack: constructs per concern, composed in dependency order."""

from __future__ import annotations

from aws_cdk import App, CfnOutput, Stack, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from quayutec import resources as R

from .api import Api
from .config import Settings
from .files import Files
from .functions import Functions
from .observability import Observability
from .reconciler import Reconciler
from .run_engine import RunEngine
from .storage import Storage
from .wakes import Wakes


class QuayutecStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs) -> None:
        super().__init__(
            scope,
            construct_id,
            description=f"Quayutec agent runtime ({settings.stage})",
            **kwargs,
        )
        self.settings = settings
        self.storage = Storage(self, "Storage", settings=settings)
        self.wakes = Wakes(self, "Wakes", storage=self.storage)
        self.functions = Functions(self, "Functions", settings=settings, storage=self.storage, queues=self.wakes.queues)
        self.run_engine = RunEngine(self, "RunEngine", settings=settings, functions=self.functions)
        state_machine = self.run_engine.state_machine
        self.functions.bind_state_machine(state_machine)
        self.wakes.connect(self.functions)
        self.files = Files(self, "Files", storage=self.storage, queues=self.wakes.queues, functions=self.functions)
        self.reconciler = Reconciler(
            self,
            "Reconciler",
            state_machine=state_machine,
            function=self.functions.target(R.FUNCTIONS_BY_ID["ReconcilerFunction"]),
            failed_events=self.wakes.failed_events,
        )
        self.observability = Observability(
            self,
            "Observability",
            settings=settings,
            queues={
                **{q.node.id: q for q in self.wakes.dead_letter_queues},
                self.wakes.failed_events.node.id: self.wakes.failed_events,
            },
            state_machine=state_machine,
            functions=self.functions.functions,
        )
        # Hook for the REST API (issue 4, infra/quayinfra/api.py): one line here, e.g.
        #   self.api = Api(self, "Api", settings=settings, storage=self.storage,
        #                  functions=self.functions, state_machine=state_machine)
        # Its Lambdas (ApiFunction, AuthorizerFunction) already come from resources.FUNCTIONS
        # through the factory (self.functions["ApiFunction"], role self.functions.roles[...]);
        # the construct adds API Gateway and what no touch names (task tokens, key rotation).
        self.api = Api(
            self, "Api", settings=settings, storage=self.storage, functions=self.functions, state_machine=state_machine
        )

        CfnOutput(self, "StateMachineArn", value=state_machine.state_machine_arn)
        CfnOutput(self, "WakeQueueUrl", value=self.wakes.wake_queue.queue_url)
        for tdef in R.TABLES:
            CfnOutput(self, f"{tdef.logical_id}Name", value=self.storage.table(tdef).table_name)
        CfnOutput(self, "RunDataBucketName", value=self.storage.bucket(R.RUN_DATA_BUCKET).bucket_name)
        CfnOutput(self, "FilesBucketName", value=self.storage.bucket(R.FILES_BUCKET).bucket_name)


def build_app(app: App | None = None, *, nag: bool = True) -> tuple[App, QuayutecStack]:
    """The app of ``infra/app.py`` (also used by the tests): one stack, cdk-nag on."""
    app = app or App()
    settings = Settings.from_context(app.node)
    stack = QuayutecStack(app, settings.stack_name, settings=settings)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack
