"""Counted figures of a plain run (SPEC §10), pinned so a regression shows: AWS calls and
writes from the call recorder, transitions from the execution history, Lambda invocations
(issue 13 has the budget; these are today's counts, lower them as the run gets cheaper)."""

from __future__ import annotations

from runhelpers import Env

from quaylocal.costs import plain_runs

#: Today's counts of one plain run (warm: the second run of the process).
AWS_CALLS_PER_PLAIN_RUN = 22
WRITES_PER_PLAIN_RUN = 6
TRANSITIONS_PER_PLAIN_RUN = 6
LAMBDA_INVOCATIONS_PER_PLAIN_RUN = 6


def test_a_plain_run_costs_what_it_cost(env: Env) -> None:
    first, second = plain_runs(env.stack, env.server, 2)
    assert second.aws_calls == AWS_CALLS_PER_PLAIN_RUN, second.by_operation
    assert second.writes == WRITES_PER_PLAIN_RUN
    assert second.transitions == TRANSITIONS_PER_PLAIN_RUN
    assert second.lambda_invocations == LAMBDA_INVOCATIONS_PER_PLAIN_RUN
    # The first run of the process reads the company's key; the next ones find it cached (60 s).
    assert first.by_operation.pop("secrets-manager.GetSecretValue") == 1
    assert first.by_operation == second.by_operation

