"""Lambda handlers: thin. Parse the event → domain logic (``quayutec.logic``) → data access."""
