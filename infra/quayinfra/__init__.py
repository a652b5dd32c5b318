"""quayinfra: the CDK app of the Quayutec runtime (one stack, constructs per concern).

Built from ``quayutec.resources`` (the one source of names, keys and functions); never
deployed into Lambda. Entry point: ``infra/app.py`` (``cdk.json``).
"""
