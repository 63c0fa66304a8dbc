"""A simulated mail server: mail to the domain ``invalid.example`` (the demo's mistyped
addresses) bounces for good, with SMTP's 550; every other address takes the mail."""

from __future__ import annotations

BOUNCING_DOMAIN = "@invalid.example"


class AddressRejected(Exception):
    """The mail server refused the address for good (SMTP 550): no retry can help."""


def send(order_id: int, to: str) -> None:
    if to.endswith(BOUNCING_DOMAIN):
        raise AddressRejected(f"550 5.1.1 <{to}>: mailbox unavailable (order {order_id})")


def address(customer: int, *, mistyped: bool = False) -> str:
    """The customer's address, or a mistyped one that bounces."""
    return f"customer{customer}{BOUNCING_DOMAIN if mistyped else '@example.com'}"
