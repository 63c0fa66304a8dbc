"""The job and run lists' search box: a job found by what an operator knows of it.

A query is words; each word must match (AND), and a word matches any of the list's
fields (OR) unless a qualifier names one: ``task:``, ``queue:``, ``key:``, ``id:``,
``worker:``. ``send_mail queue:mail`` finds the mail queue's jobs of every task whose
name holds ``send_mail``. Every match reads an index, so a search costs about the same
at a million jobs as at a thousand:

* **task** -- a part of the name, any case. The table's distinct task names are read
  first, one index descent each (:func:`distinct_values`: a few dozen names, not a scan
  of the jobs), matched in Python, and the jobs found by ``task IN (...)`` on the task
  index.
* **queue** -- a part of the name, any case, matched against the queue table's names.
* **key** and **id** -- the start of the unique key or of the id (a whole one too): a
  range of the index (:func:`starts_with`).
* **worker** -- a part of the holder of a running job's lease (the running jobs are few,
  and a lease is the only record on the job of which worker has it).

Payloads, errors and log lines are never searched.

A list is newest first, and a database walking the ids down to the first 50 matches
meets late the matches of an old task (a retired task's 50,000 jobs, all older than
the rest: PostgreSQL's plan walked 950,000 rows for them). So a search first reads the
ids it finds, unordered, through the indexes above (:func:`narrowed`); when there are at
most :data:`LISTED`, the page is those ids, newest first. Up to :data:`SORTED` matches
are read whole through those indexes and sorted (:func:`sorted_whole`); only more than
that are met by the walk down the ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import Q, QuerySet
from django.db.models.functions import Coalesce, Left
from django.db.models.lookups import Exact
from django.utils.text import smart_split, unescape_string_literal

from boson_django.admin.paginator import CAP
from boson_django.models import Job, Queue, Run
from boson_django import database
from boson_django.states import JobState

#: The most distinct task names a search reads (beyond them, names sorting later are not found).
MAX_NAMES = 2_000
#: A search finding at most this many rows lists them by id (:func:`narrowed`).
LISTED = CAP
#: A search finding at most this many rows sorts them all (:func:`sorted_whole`).
SORTED = 100_000
#: Set on a request whose search's matches are to be sorted whole.
WHOLE = "_boson_search_sorts_whole"
#: A character -> one that sorts after it in code point order and in every language's
#: order (digits before letters, letters alphabetical in either case). ``z`` and ``Z``
#: have none: what follows them in code point order is punctuation, which a language's
#: order sorts before the letters.
_SUCCESSORS = {c: chr(ord(c) + 1) for c in "012345678abcdefghijklmnopqrstuvwxyABCDEFGHIJKLMNOPQRSTUVWXY"}
_SUCCESSORS["9"] = "a"


@dataclass(frozen=True)
class Term:
    """One word of a query: ``field`` is the qualifier it named, or None (any field)."""

    field: str | None
    text: str


def parse(query: str, fields: tuple[str, ...]) -> list[Term]:
    """The words of ``query``; ``"two words"`` is one word. A word ``name:rest`` whose
    ``name`` is one of ``fields`` qualifies ``rest``; any other colon is part of the word
    (unique keys and worker ids hold colons)."""
    terms = []
    for word in smart_split(query):
        if word[:1] in "\"'" and word[-1:] == word[:1]:
            word = unescape_string_literal(word)
        name, colon, rest = word.partition(":")
        if colon and name.lower() in fields:
            if rest.strip():
                terms.append(Term(name.lower(), rest.strip()))
        elif word.strip():
            terms.append(Term(None, word.strip()))
    return terms


def distinct_values(table: str, column: str, using: str, cap: int = MAX_NAMES) -> list[str]:
    """The distinct values of ``column`` (the leading column of an index of ``table``), in
    order, at most ``cap``: a loose index scan, one descent per value, so reading the task
    names of a million jobs costs their number of descents, not a million rows. Both
    PostgreSQL and SQLite run the recursive query as written."""
    sql = (
        f"WITH RECURSIVE v(val, n) AS ("
        f" SELECT (SELECT {column} FROM {table} ORDER BY {column} LIMIT 1), 1"
        f" UNION ALL"
        f" SELECT (SELECT t.{column} FROM {table} t WHERE t.{column} > v.val ORDER BY t.{column} LIMIT 1), v.n + 1"
        f" FROM v WHERE v.val IS NOT NULL AND v.n < %s"
        f") SELECT val FROM v WHERE val IS NOT NULL"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [cap])
        return [row[0] for row in cursor.fetchall()]


def containing(names: list[str], text: str) -> list[str]:
    """The ``names`` holding ``text``, in any case."""
    folded = text.casefold()
    return [name for name in names if folded in name.casefold()]


def starts_with(column: str, text: str) -> Q:
    """Rows whose ``column`` starts with ``text`` (case and all), found as a range of
    ``column``'s index: ``column >= text`` and below the smallest string that sorts after
    every string starting with it, then checked exactly (the range may hold a few more).

    The upper bound is taken past the last letter or digit of ``text`` whose successor is
    a letter or digit too (``ab-7`` -> below ``ab-8``; ``abz`` -> below ``ac``), so the
    range holds every match in code point order (SQLite, PostgreSQL's ``C`` and
    ``C.UTF-8``) and in a language's order (``en_US``...), which sorts punctuation
    differently but letters and digits alike. With no such character, the range has
    no upper bound."""
    exact = Exact(Left(column, len(text)), text)
    cut = len(text)
    while cut and text[cut - 1] not in _SUCCESSORS:
        cut -= 1
    bound = Q(**{f"{column}__gte": text})
    if cut:
        bound &= Q(**{f"{column}__lt": text[: cut - 1] + _SUCCESSORS[text[cut - 1]]})
    return bound & Q(exact)


def narrowed(queryset: QuerySet, terms: list[list[Q]]) -> tuple[QuerySet, bool]:
    """``queryset`` filtered by a search, and whether to sort its matches whole.

    Every term (a word's ways to match, any of which will do) must match. Each way is
    read on its own, unordered, so through its own index (one query over ``OR``-ed
    columns made SQLite scan the table), and the ids found are the page's when they are
    few: at most :data:`LISTED` (fewer where SQLite binds fewer parameters). A term
    matching more rows is applied as a filter on top. When every term does, the search
    is one query; if one term matches at most :data:`SORTED` rows, the matches are to be
    read through the terms' indexes and sorted (:func:`sorted_whole`), else they are 10%
    of a million jobs or more, which a walk down the ids meets early unless nearly all
    are old."""
    most = min(LISTED, database.most_listed(connections[queryset.db], besides=100))
    ids: set[Any] | None = None
    broad = Q()
    broad_terms = []
    for arms in terms:
        term_ids = _ids(queryset, arms, most)
        if term_ids is None:
            broad &= _any(arms)
            broad_terms.append(arms)
        else:
            ids = term_ids if ids is None else ids & term_ids
    if ids is not None:
        return queryset.filter(broad, pk__in=ids), False
    return queryset.filter(broad), any(_at_most(queryset, arms, SORTED) for arms in broad_terms)


def _ids(queryset: QuerySet, arms: list[Q], most: int) -> set[Any] | None:
    """The ids matching any of ``arms``, or None when there are more than ``most``."""
    found: set[Any] = set()
    for arm in arms:
        found.update(queryset.filter(arm).order_by().values_list("pk", flat=True)[: most + 1])
        if len(found) > most:
            return None
    return found


def _at_most(queryset: QuerySet, arms: list[Q], most: int) -> bool:
    """Whether ``arms`` match at most ``most`` rows, each arm counted on its own index
    (their sum bounds what they match together)."""
    total = 0
    for arm in arms:
        total += queryset.filter(arm).order_by().values("pk")[: most + 1].count()
        if total > most:
            return False
    return True


def sorted_whole(queryset: QuerySet) -> QuerySet:
    """``queryset`` ordered as it is, but by an id the primary key's index cannot give in
    order (``COALESCE(id, id)``): the database then reads the matches through the indexes
    of its filters and sorts them, instead of walking the ids down until it has a page."""
    order = []
    for item in queryset.query.order_by:
        if isinstance(item, str) and item.lstrip("-") in ("pk", queryset.model._meta.pk.name):
            key = Coalesce("pk", "pk")
            item = key.desc() if item.startswith("-") else key.asc()
        order.append(item)
    return queryset.order_by(*order)


def _any(arms: list[Q]) -> Q:
    either = Q()
    for arm in arms:
        either |= arm
    return either


def nothing() -> Q:
    return Q(pk__in=[])


@dataclass
class Fields:
    """How one list matches each field: ``field -> (text -> Q)``."""

    match: dict[str, Callable[[str], Q]]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.match)

    def terms(self, query: str) -> list[list[Q]]:
        """Per word of ``query``, its ways to match: its field's, or every field's."""
        return [[self.match[term.field](term.text)] if term.field is not None
                else [match(term.text) for match in self.match.values()]
                for term in parse(query, self.names)]


def _in_or_nothing(column: str, values: list[str]) -> Q:
    return Q(**{f"{column}__in": values}) if values else nothing()


def _queues(text: str) -> Q:
    names = list(Queue.objects.order_by("name").values_list("name", flat=True)[:MAX_NAMES])
    return _in_or_nothing("queue", containing(names, text))


def _running_held_by(text: str) -> Q:
    """Running jobs (each holds a lease, so ``lease_expires_at`` is set: the condition
    lets SQLite read them through the lease index) whose holder holds ``text``."""
    return Q(state=JobState.RUNNING.value, lease_expires_at__isnull=False, lease_holder__icontains=text)


def job_fields(using: str) -> Fields:
    """The job lists' fields."""
    return Fields({
        "task": lambda text: _in_or_nothing("task", containing(distinct_values(Job._meta.db_table, "task", using), text)),
        "queue": _queues,
        "key": lambda text: starts_with("unique_key", text),
        "id": lambda text: starts_with("id", text),
        "worker": _running_held_by,
    })


def run_fields(using: str) -> Fields:
    """The runs list's fields: ``id`` is the job's; ``worker`` finds the open runs of the
    jobs a worker holds (the run table has no index of workers: a finished run's worker
    is read on the run, not searched)."""
    def worker(text: str) -> Q:
        held = Job.objects.filter(_running_held_by(text)).values("id")
        return Q(finished_at__isnull=True, job_id__in=held)

    return Fields({
        "task": lambda text: _in_or_nothing("task", containing(distinct_values(Run._meta.db_table, "task", using), text)),
        "queue": _queues,
        "id": lambda text: starts_with("job_id", text),
        "worker": worker,
    })
