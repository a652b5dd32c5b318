"""Reading the synthesized template."""

from __future__ import annotations

from typing import Any


def of_type(resources: dict, rtype: str) -> dict[str, dict]:
    return {k: v for k, v in resources.items() if v["Type"] == rtype}


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def role_of_function(resources: dict, function_id: str) -> str:
    role = resources[function_id]["Properties"]["Role"]
    return role["Fn::GetAtt"][0]


def statements_of_role(resources: dict, role_id: str) -> list[dict]:
    """Every statement of the inline policies and AWS::IAM::Policy resources of a role."""
    out: list[dict] = []
    role = resources[role_id]["Properties"]
    assert not role.get("ManagedPolicyArns"), f"{role_id} has managed policies"
    for policy in role.get("Policies", []):
        out += as_list(policy["PolicyDocument"]["Statement"])
    for res in of_type(resources, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in res["Properties"].get("Roles", []):
            out += as_list(res["Properties"]["PolicyDocument"]["Statement"])
    return out


def referenced_ids(value: Any) -> set[str]:
    """Logical ids a (resource) expression points at via Ref / Fn::GetAtt."""
    found: set[str] = set()
    if isinstance(value, dict):
        if "Ref" in value and not str(value["Ref"]).startswith("AWS::"):
            found.add(value["Ref"])
        if "Fn::GetAtt" in value:
            found.add(value["Fn::GetAtt"][0])
        for v in value.values():
            found |= referenced_ids(v)
    elif isinstance(value, list):
        for v in value:
            found |= referenced_ids(v)
    return found


def flat(value: Any) -> str:
    """A resource expression as text: Fn::Join parts concatenated, refs as <Id>."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return sep.join(flat(p) for p in parts)
        if "Ref" in value:
            return f"<{value['Ref']}>"
        if "Fn::GetAtt" in value:
            return f"<{'.'.join(value['Fn::GetAtt'])}>"
    return repr(value)


def asset_source(stack_files, s3_key: str):
    """The cloud-assembly path of the file asset uploaded as ``s3_key``."""
    import json

    _name, template_path, assets_path = stack_files
    for asset in json.loads(assets_path.read_text())["files"].values():
        if any(d["objectKey"] == s3_key for d in asset["destinations"].values()):
            return template_path.parent / asset["source"]["path"]
    raise KeyError(s3_key)
