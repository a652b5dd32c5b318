"""The phases of one run (design §2), a module per phase of the state machine, each called by a
thin Lambda handler with the Step Functions state and returning the next state. State carries
ids only (:class:`~quayutec.models.RunState`); context and the model reply live in run data or
the ledger under the run id."""
