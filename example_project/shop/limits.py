"""Rate limits of the shop: one token bucket per rate class.

A bucket lives in the database (operators retune it in the admin); set it up once, e.g.
from a data migration or a deploy step. Unconfigured rate classes are unlimited.
"""

from boson_django import services

from shop.tasks import SMTP

#: At most 5 mails per second, in bursts of at most 5.
SMTP_LIMIT = {"limit": 5, "window_ms": 1_000, "burst": 5}


def configure() -> None:
    services.set_rate_limit(SMTP, **SMTP_LIMIT)
