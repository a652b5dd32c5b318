"""quaylab: the lab built on the local engine (:mod:`quaylocal`): fault injection and the chaos
matrix (:mod:`quaylab.faults`, :mod:`quaylab.chaos`), the IAM check of every recorded AWS call
(:mod:`quaylab.iam_check`), STS trust policies (:mod:`quaylab.sts_trust`) and the counted figures of
runs (:mod:`quaylab.costs`). It installs its hooks into the engine's stacks through the deployed
code's one seam (:mod:`quayutec.seams`); the engine imports nothing of it. Never deployed."""
