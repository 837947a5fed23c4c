"""Look a ticket up in the help desk."""


def lookup(ticket_id: str) -> dict:
    return {"id": ticket_id}
