"""Deploy a synthesized cloud assembly onto moto's CloudFormation (or any endpoint), offline.

What `cdk deploy` does that moto needs done by hand (docs: shared notes LOCAL-AWS.md):

* the bootstrap: SSM parameter ``/cdk-bootstrap/<qualifier>/version`` and the asset bucket;
* publishing the file assets (directories zipped, files as they are) to their object keys;
* ``create_stack`` with the template;
* ``DefinitionSubstitutions``, which moto does not apply: :func:`apply_definition_substitutions`
  resolves them against the created stack and updates the state machine.

Only boto3 clients are used (pass moto-backed ones); nothing here imports moto.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

QUALIFIER = "hnb659fds"  # the CDK default bootstrap qualifier
BOOTSTRAP_VERSION = "30"
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]


def stack_artifact(assembly: Path, stack_name: str | None = None) -> tuple[str, Path, Path]:
    """(stack name, template path, assets manifest path) of the assembly's (only) stack."""
    manifest = json.loads((assembly / "manifest.json").read_text())
    stacks = [
        (name, a)
        for name, a in manifest["artifacts"].items()
        if a["type"] == "aws:cloudformation:stack" and (stack_name is None or name == stack_name)
    ]
    if len(stacks) != 1:
        raise ValueError(f"expected one stack in {assembly}, found {[n for n, _ in stacks]}")
    name, artifact = stacks[0]
    template = assembly / artifact["properties"]["templateFile"]
    return name, template, assembly / f"{name}.assets.json"


def _sub(text: str, account: str, region: str, partition: str = "aws") -> str:
    return (
        text.replace("${AWS::AccountId}", account)
        .replace("${AWS::Region}", region)
        .replace("${AWS::Partition}", partition)
    )


def zip_directory(path: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            zf.write(file, file.relative_to(path).as_posix())
    return buf.getvalue()


def bootstrap(ssm: Any, s3: Any, *, account: str, region: str) -> str:
    """What `cdk bootstrap` leaves that a deploy needs. Returns the asset bucket name."""
    ssm.put_parameter(
        Name=f"/cdk-bootstrap/{QUALIFIER}/version", Value=BOOTSTRAP_VERSION, Type="String", Overwrite=True
    )
    bucket = f"cdk-{QUALIFIER}-assets-{account}-{region}"
    kwargs = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket, **kwargs)
    return bucket


def publish_assets(s3: Any, assets_manifest: Path, *, account: str, region: str) -> list[str]:
    """Upload every file asset of the stack (templates excluded). Returns the object keys."""
    assembly = assets_manifest.parent
    keys: list[str] = []
    for asset in json.loads(assets_manifest.read_text())["files"].values():
        source = assembly / asset["source"]["path"]
        if source.suffix == ".json" and source.name.endswith(".template.json"):
            continue
        if asset["source"].get("packaging") == "zip" and source.is_dir():
            body = zip_directory(source)
        else:
            body = source.read_bytes()
        for dest in asset["destinations"].values():
            bucket = _sub(dest["bucketName"], account, region)
            s3.put_object(Bucket=bucket, Key=dest["objectKey"], Body=body)
            keys.append(dest["objectKey"])
    return keys


def refuse_aliases(template: dict[str, Any]) -> None:
    """Raise ``ValueError`` for a template synthesized with ``snapStart`` on: moto's
    CloudFormation skips ``AWS::Lambda::Alias``, so the state machine and the event sources would
    name aliases that do not exist. The local stack deploys the default synthesis (``snapStart``
    off); tests/infra checks the template with it on (docs/deploy.md)."""
    aliases = sorted(k for k, v in template.get("Resources", {}).items() if v.get("Type") == "AWS::Lambda::Alias")
    if aliases:
        raise ValueError(
            f"the template has Lambda aliases ({', '.join(aliases[:3])}{', ...' if len(aliases) > 3 else ''}): "
            "synthesized with -c snapStart=true, which moto's CloudFormation cannot deploy; "
            "synthesize with snapStart off for the local stack"
        )


def create_stack(cfn: Any, stack_name: str, template: Path) -> dict[str, Any]:
    refuse_aliases(json.loads(template.read_text()))
    cfn.create_stack(StackName=stack_name, TemplateBody=template.read_text(), Capabilities=CAPABILITIES)
    return cfn.describe_stacks(StackName=stack_name)["Stacks"][0]


def physical_ids(cfn: Any, stack_name: str) -> dict[str, str]:
    """Logical id -> physical id of every created resource."""
    out: dict[str, str] = {}
    paginator = cfn.get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=stack_name):
        for res in page["StackResourceSummaries"]:
            if res.get("PhysicalResourceId"):
                out[res["LogicalResourceId"]] = res["PhysicalResourceId"]
    return out


def resolve(
    value: Any, template: dict[str, Any], lambda_client: Any, ids: dict[str, str], partition: str = "aws"
) -> str:
    """Resolve the intrinsics CDK uses in DefinitionSubstitutions (Ref, Ref AWS::Partition,
    Fn::GetAtt X.Arn of a Lambda function, plain strings)."""
    if isinstance(value, str):
        return value
    if value == {"Ref": "AWS::Partition"}:
        return partition
    if "Ref" in value:
        return ids[value["Ref"]]
    if "Fn::GetAtt" in value:
        logical, attr = value["Fn::GetAtt"]
        rtype = template["Resources"][logical]["Type"]
        if rtype == "AWS::Lambda::Function" and attr == "Arn":
            return lambda_client.get_function(FunctionName=ids[logical])["Configuration"]["FunctionArn"]
    raise ValueError(f"cannot resolve {value!r} locally")


def apply_definition_substitutions(
    cfn: Any, sfn: Any, lambda_client: Any, stack_name: str, template_path: Path
) -> dict[str, str]:
    """Put the substituted definition on every state machine of the stack (moto leaves the
    ``${...}`` placeholders). Returns state machine ARN -> definition."""
    template = json.loads(template_path.read_text())
    ids = physical_ids(cfn, stack_name)
    done: dict[str, str] = {}
    for logical, res in template["Resources"].items():
        if res["Type"] != "AWS::StepFunctions::StateMachine":
            continue
        props = res["Properties"]
        definition = props["DefinitionString"]
        if not isinstance(definition, str):
            raise ValueError(f"{logical}: DefinitionString is not a plain string")
        for key, value in props.get("DefinitionSubstitutions", {}).items():
            definition = definition.replace("${" + key + "}", resolve(value, template, lambda_client, ids))
        arn = ids[logical]
        sfn.update_state_machine(stateMachineArn=arn, definition=definition)
        done[arn] = definition
    return done


def deploy(
    assembly: Path,
    *,
    cfn: Any,
    s3: Any,
    ssm: Any,
    sfn: Any,
    lambda_client: Any,
    account: str,
    region: str | None = None,
) -> dict[str, Any]:
    """Bootstrap, publish, create the stack, apply the definition substitutions."""
    region = region or os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    name, template, assets = stack_artifact(assembly)
    bootstrap(ssm, s3, account=account, region=region)
    publish_assets(s3, assets, account=account, region=region)
    stack = create_stack(cfn, name, template)
    if stack["StackStatus"] == "CREATE_COMPLETE":
        apply_definition_substitutions(cfn, sfn, lambda_client, name, template)
    return stack
