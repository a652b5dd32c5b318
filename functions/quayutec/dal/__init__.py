"""Data access: DynamoDB (room, claims, ledger), S3 (run data). No domain rules here."""
