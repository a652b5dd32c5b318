"""What a run costs (docs/design.md §10): the cost line and the prices it is estimated with.

* :mod:`quayutec.cost.line` — a run's cost line: each phase invocation counts its own AWS calls,
  DynamoDB capacity, model tokens, time and states; the counts travel in the run state and are
  written once, with the run's final status.
* :mod:`quayutec.cost.prices` — the one price table (USD, us-east-1, each price with its source
  and date; model tokens per model, :data:`quayutec.cost.prices.MODEL_PRICES`, overridable by the
  ``MODEL_PRICES`` setting), used by the cost line and the company budgets.

Nothing is imported here: a caller imports the module it uses.
"""
