"""The room API behind API Gateway (issue 4): resolver, routers, request/response models,
authorization rules, idempotency. The Lambda entry points are ``quayutec.handlers.api`` and
``quayutec.handlers.authorizer``."""
