#!/usr/bin/env python3
"""CDK app of the Quayutec runtime: `npx cdk synth|deploy|destroy` from the repo root.

Settings are CDK context (`-c stage=prod`), documented in infra/quayinfra/config.py.
The Lambda dependency layer is built (cached in .build/layer/) before synthesis.
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
    # Under the CDK CLI, CDK_OUTDIR names the output; run directly (`make synth`): ./cdk.out.
    app, _stack = build_app(App(outdir=os.environ.get("CDK_OUTDIR", str(_ROOT / "cdk.out"))))
    app.synth()
