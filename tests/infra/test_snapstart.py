"""The ``snapStart`` context switch (docs/design.md §10, docs/deploy.md): off by default (the
session's template), on in a synthesis of its own. With it on, every function has SnapStart on
published versions, a version and a ``live`` alias; the state machine's Lambda tasks, the API
integration and authorizer, the event source mappings and the reconciler's EventBridge target
name the alias, and the grants name it too (qualified ARNs). CallModel imports the provider SDKs
at init only then. moto's CloudFormation skips aliases, so the local deploy refuses such a
template (the local stack deploys the default synthesis)."""

from __future__ import annotations

import json

import pytest
from infra_helpers import as_list, of_type, referenced_ids

from quayutec import resources as R

ALIAS = "AWS::Lambda::Alias"
PHASES = [f for f in R.FUNCTIONS if f.asl_placeholder]


@pytest.fixture(scope="module")
def snap_template(tmp_path_factory) -> dict:
    from aws_cdk import App

    from quayinfra.stack import build_app

    out = tmp_path_factory.mktemp("snapstart")
    # nag on: the switch adds no unacknowledged finding
    app, stack = build_app(App(outdir=str(out), context={"snapStart": True}))
    return app.synth().get_stack_by_name(stack.stack_name).template


def _alias_of(resources: dict, function_id: str) -> str:
    """The logical id of ``function_id``'s one alias (its version names the function)."""
    found = []
    for alias_id, alias in of_type(resources, ALIAS).items():
        fn = alias["Properties"]["FunctionName"]
        if fn == {"Ref": function_id}:
            found.append(alias_id)
    assert len(found) == 1, (function_id, found)
    return found[0]


def _state_machine(resources: dict) -> dict:
    (machine,) = of_type(resources, "AWS::StepFunctions::StateMachine").values()
    return machine["Properties"]


def _invoke_resources(resources: dict) -> list:
    """The Resource entries of the state machine role's lambda:InvokeFunction statements."""
    role = _state_machine(resources)["RoleArn"]["Fn::GetAtt"][0]
    out = []
    for policy in of_type(resources, "AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for stmt in policy["Properties"]["PolicyDocument"]["Statement"]:
            if "lambda:InvokeFunction" in as_list(stmt["Action"]):
                out.extend(as_list(stmt["Resource"]))
    return out


# ----------------------------------------------------------------------------- off (the default)
def test_off_by_default_no_alias_no_snapstart(resources):
    assert not of_type(resources, ALIAS)
    for fdef in R.FUNCTIONS:
        props = resources[fdef.logical_id]["Properties"]
        assert "SnapStart" not in props
        assert R.PROVIDER_SDKS_AT_INIT_ENV not in props.get("Environment", {}).get("Variables", {})


def test_off_the_state_machine_and_its_grant_name_the_functions(resources):
    subs = _state_machine(resources)["DefinitionSubstitutions"]
    for fdef in PHASES:
        assert subs[fdef.asl_placeholder] == {"Fn::GetAtt": [fdef.logical_id, "Arn"]}
    assert sorted(_invoke_resources(resources), key=str) == sorted(
        ({"Fn::GetAtt": [f.logical_id, "Arn"]} for f in PHASES), key=str
    )


def test_off_api_gateway_invokes_the_functions(resources):
    for fdef_id in ("ApiFunction", "AuthorizerFunction"):
        perms = [
            p
            for p in of_type(resources, "AWS::Lambda::Permission").values()
            if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
            and referenced_ids(p["Properties"]["FunctionName"]) == {fdef_id}
        ]
        assert perms, fdef_id


# ----------------------------------------------------------------------------- on
def test_on_every_function_has_snapstart_a_version_and_an_alias(snap_template):
    resources = snap_template["Resources"]
    versions = of_type(resources, "AWS::Lambda::Version")
    for fdef in R.FUNCTIONS:
        assert resources[fdef.logical_id]["Properties"]["SnapStart"] == {"ApplyOn": "PublishedVersions"}
        alias = resources[_alias_of(resources, fdef.logical_id)]
        assert alias["Properties"]["Name"] == "live"
        version_id = referenced_ids(alias["Properties"]["FunctionVersion"])
        (vid,) = version_id
        assert versions[vid]["Properties"]["FunctionName"] == {"Ref": fdef.logical_id}
        # an old version is deleted once replaced: a kept one would stay cached (and billed)
        assert versions[vid].get("DeletionPolicy") == "Delete"
    assert len(of_type(resources, ALIAS)) == len(R.FUNCTIONS)


def test_on_the_state_machine_names_the_aliases_and_its_grant_is_qualified(snap_template):
    resources = snap_template["Resources"]
    subs = _state_machine(resources)["DefinitionSubstitutions"]
    aliases = {f.logical_id: _alias_of(resources, f.logical_id) for f in PHASES}
    for fdef in PHASES:
        assert subs[fdef.asl_placeholder] == {"Ref": aliases[fdef.logical_id]}  # Ref of an alias: its ARN
    granted = _invoke_resources(resources)
    assert sorted(granted, key=str) == sorted(({"Ref": a} for a in aliases.values()), key=str)
    assert not any(referenced_ids(g) & {f.logical_id for f in PHASES} for g in granted)  # no unqualified ARN


def test_on_api_gateway_integration_and_authorizer_name_the_aliases(snap_template):
    resources = snap_template["Resources"]
    api_alias = _alias_of(resources, "ApiFunction")
    auth_alias = _alias_of(resources, "AuthorizerFunction")
    (authorizer,) = of_type(resources, "AWS::ApiGateway::Authorizer").values()
    assert api_alias not in json.dumps(authorizer) and auth_alias in json.dumps(authorizer)
    methods = of_type(resources, "AWS::ApiGateway::Method")
    uris = [m["Properties"]["Integration"]["Uri"] for m in methods.values() if "Integration" in m["Properties"]]
    assert uris and all(referenced_ids(u) & {api_alias} for u in uris)
    assert not any(referenced_ids(u) & {"ApiFunction"} for u in uris)
    for alias_id, fn_id in ((api_alias, "ApiFunction"), (auth_alias, "AuthorizerFunction")):
        perms = [
            p["Properties"]
            for p in of_type(resources, "AWS::Lambda::Permission").values()
            if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
            and referenced_ids(p["Properties"]["FunctionName"]) & {alias_id, fn_id}
        ]
        assert perms and all(p["FunctionName"] == {"Ref": alias_id} for p in perms), fn_id


def test_on_event_sources_and_the_reconciler_target_name_the_aliases(snap_template):
    resources = snap_template["Resources"]
    mappings = of_type(resources, "AWS::Lambda::EventSourceMapping")
    by_function = {next(iter(referenced_ids(m["Properties"]["FunctionName"]))) for m in mappings.values()}
    assert by_function == {
        _alias_of(resources, f) for f in ("WakeRelayFunction", "WakeConsumerFunction", "IngestFunction")
    }
    reconciler_alias = _alias_of(resources, "ReconcilerFunction")
    (rule,) = of_type(resources, "AWS::Events::Rule").values()
    assert [t["Arn"] for t in rule["Properties"]["Targets"]] == [{"Ref": reconciler_alias}]
    (invoke_config,) = of_type(resources, "AWS::Lambda::EventInvokeConfig").values()
    # the alias's qualifier (CDK takes it from the alias ARN: "live")
    assert referenced_ids(invoke_config["Properties"]["Qualifier"]) == {reconciler_alias}


def test_on_call_model_imports_the_sdks_at_init_and_no_other_function_is_told(snap_template):
    resources = snap_template["Resources"]
    for fdef in R.FUNCTIONS:
        env = resources[fdef.logical_id]["Properties"].get("Environment", {}).get("Variables", {})
        if fdef.logical_id == "CallModelFunction":
            assert env[R.PROVIDER_SDKS_AT_INIT_ENV] == "true"
        else:
            assert R.PROVIDER_SDKS_AT_INIT_ENV not in env


def test_the_local_deploy_refuses_a_template_with_aliases(snap_template, template):
    from quayinfra.localdeploy import refuse_aliases

    refuse_aliases(template)  # the default synthesis deploys locally
    with pytest.raises(ValueError, match="snapStart"):
        refuse_aliases(snap_template)


def test_the_context_value_is_a_boolean():
    from aws_cdk import App

    from quayinfra.config import Settings, SettingsError

    assert Settings.from_context(App(context={"snapStart": "true"}).node).snap_start is True
    assert Settings.from_context(App().node).snap_start is False
    with pytest.raises(SettingsError, match="snapStart"):
        Settings.from_context(App(context={"snapStart": "sometimes"}).node)
