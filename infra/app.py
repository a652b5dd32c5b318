#!/usr/bin/env python3
"""CDK app of the Quayutec runtime: `npx cdk synth|deploy|destroy` from the repo root.

Settings are CDK context (`-c stage=prod`), documented in infra/quayinfra/config.py.
The Lambda dependency layer is built (cached in .build/layer/) before synthesis.

Only through the CDK CLI (`make synth` runs `npx cdk synth`): the CLI hands the app cdk.json's
context and feature flags (e.g. @aws-cdk/aws-iam:minimizePolicies), without which the template
differs from the deployed one. Run directly, this script stops and says so.
"""

import os
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
for _path in (_ROOT / "infra", _ROOT / "functions"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App  # noqa: E402

from quayinfra.stack import build_app  # noqa: E402

if __name__ == "__main__":
    if "CDK_OUTDIR" not in os.environ:  # set by the CDK CLI, with cdk.json's context
        sys.exit(
            "infra/app.py runs under the CDK CLI, which applies cdk.json's context and "
            "feature flags: `make synth` or `npx cdk synth|deploy`."
        )
    app, _stack = build_app(App())  # outdir and context from the CLI
    app.synth()
