"""Domain logic: the run semantics (SPEC §2), wakes (§3), declared actions and rights (§4, §5)."""
