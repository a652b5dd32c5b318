"""cdk-nag (AwsSolutions) acknowledgments: one helper, every call site gives its reason.

cdk-nag 3.x reads CDK's native ``Validations.of(scope).acknowledge(...)``; each finding of a
granular rule (IAM5) is acknowledged on its own, e.g. ``AwsSolutions-IAM5[Resource::*]``.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

PLUGIN = "AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str, *findings: str) -> None:
    """Acknowledge ``rule`` (e.g. "IAM5") on ``scope``: the whole rule, or only ``findings``
    (e.g. "Resource::*", "Action::xray:*")."""
    base = f"{PLUGIN}::{PLUGIN}-{rule}"
    ids = [f"{base}[{f}]" for f in findings] if findings else [base]
    Validations.of(scope).acknowledge(*(Acknowledgment(id=i, reason=reason) for i in ids))
