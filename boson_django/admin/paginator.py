"""A paginator that never counts past a cap: "10,000+" instead of a full-table COUNT(*)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.utils.functional import cached_property

CAP = 10_000


def capped_count(queryset, cap: int = CAP) -> tuple[int, bool]:
    """``(n, capped)``: counts at most ``cap + 1`` rows (``SELECT COUNT(*) FROM (... LIMIT)``)."""
    n = queryset.order_by().values("pk")[: cap + 1].count()
    return min(n, cap), n > cap


def count_label(n: int, capped: bool) -> str:
    return f"{n:,}+" if capped else f"{n:,}"


class CappedPaginator(Paginator):
    """Counts up to ``CAP`` rows; pages beyond the cap are reached by narrowing the filters."""

    cap = CAP

    @cached_property
    def count(self) -> int:  # type: ignore[override]
        n, self.capped = capped_count(self.object_list, self.cap)
        return n

    @property
    def count_label(self) -> str:
        return count_label(self.count, self.capped)
