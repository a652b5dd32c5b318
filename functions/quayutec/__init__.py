"""quayutec: the Lambda code of the Quayutec agent runtime (docs/design.md).

Everything under this package is deployed to AWS Lambda. Nothing here imports the CLI,
the local stack or the tests (``infra/quaylocal``).
"""
