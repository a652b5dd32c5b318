"""Domain logic: the run semantics (design §2), wakes (§3), declared actions and rights (§4, §5)."""
