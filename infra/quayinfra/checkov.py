"""checkov acknowledgments: one helper, every call site gives its reason (as :mod:`quayinfra.nag`).

checkov reads a resource's CloudFormation ``Metadata``: ``{"checkov": {"skip": [{"id": ...,
"comment": ...}]}}``; the test suite runs checkov on the synthesized template and fails on any
check neither passed nor acknowledged here (tests/infra/test_checkov.py).
"""

from __future__ import annotations

from aws_cdk import CfnResource
from constructs import IConstruct


def _cfn(scope: IConstruct) -> CfnResource:
    child = scope if isinstance(scope, CfnResource) else scope.node.default_child
    if not isinstance(child, CfnResource):
        raise TypeError(f"{scope.node.path} has no CloudFormation resource to acknowledge a checkov check on")
    return child


def acknowledge(scope: IConstruct, check: str, reason: str) -> None:
    """Acknowledge checkov's ``check`` (e.g. "CKV_AWS_115") on ``scope``'s CloudFormation resource
    (an L1, or an L2's default child), with ``reason`` as the comment checkov reports."""
    resource = _cfn(scope)
    metadata = resource.get_metadata("checkov") or {"skip": []}
    skips = [s for s in metadata["skip"] if s["id"] != check] + [{"id": check, "comment": reason}]
    resource.add_metadata("checkov", {"skip": skips})
