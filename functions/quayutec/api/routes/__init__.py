"""One Powertools Router per resource of the room API."""
