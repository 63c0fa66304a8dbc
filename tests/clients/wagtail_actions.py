"""Runs inside a stock Wagtail site's own process (its settings, its database), never in the
test suite's: ``python -m tests.clients.wagtail_actions operate|dump|jobs|later``, from the
site's directory (site_actions.py has ``jobs`` and ``later``).

``operate`` drives Wagtail's admin views with Django's test client, as an editor would:
pages created, published, edited and deleted, images uploaded, edited and deleted,
redirects created, edited and deleted. Every response is checked (no 500: the client
re-raises a view's exception, so the process fails with its traceback) and so is what each
action did. It prints the ids it made, and the objects it deleted, as JSON.

``dump`` prints, as JSON, what Wagtail's tasks leave behind: the reference index, the search
index (the database backend's entries), the pages and images, the files in MEDIA_ROOT, and
what a search finds -- each keyed by natural keys, so that two copies of the site (boson's
and Django's immediate backend's) compare equal when they agree.
"""

from __future__ import annotations

import json

from tests.clients.site_actions import expect, logged_in_client, main, media_files, png


class Editor:
    """Wagtail's admin, through the test client, logged in as the site's superuser."""

    def __init__(self):
        self.client = logged_in_client()

    def post(self, name: str, args: tuple, data: dict, what: str, status: int = 302):
        from django.urls import reverse

        return expect(self.client.post(reverse(name, args=args), data), status, what)

    def get(self, name: str, args: tuple, what: str):
        from django.urls import reverse

        return expect(self.client.get(reverse(name, args=args)), 200, what)

    def add_page(self, parent, title: str, slug: str, publish: bool):
        from wagtail.models import Page

        data = {"title": title, "slug": slug}
        if publish:
            data["action-publish"] = "action-publish"
        self.get("wagtailadmin_pages:add", ("home", "homepage", parent.pk), f"open the form for {title!r}")
        self.post("wagtailadmin_pages:add", ("home", "homepage", parent.pk), data, f"create page {title!r}")
        page = Page.objects.get(slug=slug).specific
        assert page.live is publish, f"page {title!r}: live={page.live}, expected {publish}"
        return page

    def edit_page(self, page, title: str, publish: bool):
        data = {"title": title, "slug": page.slug}
        if publish:
            data["action-publish"] = "action-publish"
        self.get("wagtailadmin_pages:edit", (page.pk,), f"open the editor of {page.title!r}")
        self.post("wagtailadmin_pages:edit", (page.pk,), data, f"edit page {page.title!r}")
        page.refresh_from_db()
        assert page.draft_title == title, f"page {page.pk}: draft title {page.draft_title!r}, expected {title!r}"
        assert (page.title == title) is publish, f"page {page.pk}: live title {page.title!r} after edit (publish={publish})"
        assert page.live, f"page {page.pk} is no longer live after an edit"

    def delete_page(self, page):
        from wagtail.models import Page

        self.get("wagtailadmin_pages:delete", (page.pk,), f"open the delete view of {page.title!r}")
        self.post("wagtailadmin_pages:delete", (page.pk,), {}, f"delete page {page.title!r}")
        assert not Page.objects.filter(pk=page.pk).exists(), f"page {page.pk} still exists after delete"

    def add_image(self, title: str, filename: str, colour: tuple[int, int, int]):
        from django.core.files.uploadedfile import SimpleUploadedFile
        from wagtail.images import get_image_model

        upload = SimpleUploadedFile(filename, png(colour), content_type="image/png")
        self.get("wagtailimages:add", (), "open the image upload form")
        self.post("wagtailimages:add", (), {"title": title, "file": upload}, f"upload image {title!r}")
        image = get_image_model().objects.get(title=title)
        # The edit view renders a rendition (a thumbnail): deleting the image deletes its file too.
        self.get("wagtailimages:edit", (image.pk,), f"open the edit view of image {title!r}")
        assert image.renditions.exists(), f"image {title!r}: the edit view made no rendition"
        return image

    def edit_image(self, image, title: str):
        data = {"title": title, "collection": image.collection_id, "tags": ""}
        self.post("wagtailimages:edit", (image.pk,), data, f"edit image {image.title!r}")
        image.refresh_from_db()
        assert image.title == title, f"image {image.pk}: title {image.title!r}, expected {title!r}"

    def delete_image(self, image):
        from wagtail.images import get_image_model

        self.get("wagtailimages:delete", (image.pk,), f"open the delete view of image {image.title!r}")
        self.post("wagtailimages:delete", (image.pk,), {}, f"delete image {image.title!r}")
        assert not get_image_model().objects.filter(pk=image.pk).exists(), f"image {image.pk} still exists after delete"

    def add_redirect(self, old_path: str, page):
        from wagtail.contrib.redirects.models import Redirect

        data = {"old_path": old_path, "site": "", "is_permanent": "on", "redirect_page": page.pk, "redirect_link": ""}
        self.get("wagtailredirects:add", (), "open the redirect form")
        self.post("wagtailredirects:add", (), data, f"create redirect {old_path}")
        redirect = Redirect.objects.get(old_path=Redirect.normalise_path(old_path))
        assert redirect.redirect_page_id == page.pk, f"redirect {old_path} leads to page {redirect.redirect_page_id}"
        return redirect

    def edit_redirect(self, redirect, page):
        data = {"old_path": redirect.old_path, "site": "", "is_permanent": "on", "redirect_page": page.pk, "redirect_link": ""}
        self.get("wagtailredirects:edit", (redirect.pk,), f"open the redirect {redirect.old_path}")
        self.post("wagtailredirects:edit", (redirect.pk,), data, f"edit redirect {redirect.old_path}")
        redirect.refresh_from_db()
        assert redirect.redirect_page_id == page.pk, f"redirect {redirect.old_path} leads to page {redirect.redirect_page_id}"

    def delete_redirect(self, redirect):
        from wagtail.contrib.redirects.models import Redirect

        self.get("wagtailredirects:delete", (redirect.pk,), f"open the delete view of redirect {redirect.old_path}")
        self.post("wagtailredirects:delete", (redirect.pk,), {}, f"delete redirect {redirect.old_path}")
        assert not Redirect.objects.filter(pk=redirect.pk).exists(), f"redirect {redirect.old_path} still exists after delete"


def operate() -> dict:
    """The editor's session. Deterministic: two fresh copies of the site get the same ids."""
    from wagtail.models import Page

    editor = Editor()
    home = Page.objects.get(depth=2).specific
    alpha = editor.add_page(home, "Alpha", "alpha", publish=False)
    editor.edit_page(alpha, "Alpha", publish=True)
    bravo = editor.add_page(home, "Bravo", "bravo", publish=True)
    editor.edit_page(bravo, "Bravo edited", publish=True)
    editor.edit_page(alpha, "Alpha draft", publish=False)
    child = editor.add_page(bravo, "Bravo child", "bravo-child", publish=True)
    doomed = editor.add_page(home, "Charlie", "charlie", publish=True)
    editor.edit_page(doomed, "Charlie edited", publish=True)
    editor.delete_page(doomed)
    sunset = editor.add_image("Sunset", "sunset.png", (250, 120, 40))
    editor.edit_image(sunset, "Sunset over the bay")
    gone = editor.add_image("Doomed image", "doomed.png", (20, 20, 200))
    editor.delete_image(gone)
    # Redirects purge the front-end cache (a task, whether or not a cache is configured).
    moved = editor.add_redirect("/old-bravo", bravo)
    editor.edit_redirect(moved, child)
    dropped = editor.add_redirect("/old-charlie", alpha)
    editor.delete_redirect(dropped)
    return {
        "pages": [alpha.pk, bravo.pk, child.pk],
        "image": sunset.pk,
        "redirect": moved.pk,
        "deleted": [described(doomed), described(gone), described(dropped)],
    }


def described(instance) -> list:
    """``[app_label, model_name, pk, class name]``: what an index task for ``instance`` is
    given, and the class whose ``DoesNotExist`` it raises once the object is gone."""
    meta = instance._meta
    return [meta.app_label, meta.model_name, instance.pk, type(instance).__name__]


def natural(content_type_id: int | None) -> str | None:
    from django.contrib.contenttypes.models import ContentType

    if content_type_id is None:
        return None
    ct = ContentType.objects.get_for_id(content_type_id)
    return f"{ct.app_label}.{ct.model}"


def rows(model, exclude: tuple[str, ...] = ("id",)) -> list[dict]:
    """Every row of ``model``, content types by natural key, sorted (ids of rows the
    tasks write differ with the order they ran in; the objects' own ids do not)."""
    found = []
    for row in model.objects.values():
        row = {k: v for k, v in row.items() if k not in exclude}
        for key in [k for k in row if k.endswith("content_type_id")]:
            row[key] = natural(row[key])
        found.append({k: str(v) if v is not None else None for k, v in row.items()})
    return sorted(found, key=lambda r: json.dumps(r, sort_keys=True))


def search_entries() -> list[dict]:
    from wagtail.search import models as search_models

    # Not title_norm: a ranking weight the database backend estimates as entries are added
    # (the mean title length at that moment over this title's; only entries still at the
    # default 1.0 are refreshed), so it depends on the order the objects were indexed in.
    entries = rows(search_models.IndexEntry, exclude=("id", "title_norm"))
    fts = getattr(search_models, "SQLiteFTSIndexEntry", None)
    if fts is not None:  # SQLite's full-text table, one row per entry
        texts = {r.pop("index_entry_id"): r for r in fts.objects.values("index_entry_id", "title", "body", "autocomplete")}
        keyed = {(e["content_type_id"], e["object_id"]): e for e in entries}
        for entry in search_models.IndexEntry.objects.all():
            keyed[(natural(entry.content_type_id), entry.object_id)]["fts"] = texts.get(entry.pk)
    return entries


def dump() -> dict:
    from wagtail.contrib.redirects.models import Redirect
    from wagtail.images import get_image_model
    from wagtail.models import Page, ReferenceIndex

    return {
        "reference_index": rows(ReferenceIndex),
        "search_index": search_entries(),
        "pages": sorted([p.url_path, p.title, p.draft_title, p.live] for p in Page.objects.all()),
        "images": sorted([i.pk, i.title, i.file.name] for i in get_image_model().objects.all()),
        "redirects": sorted([r.old_path, r.redirect_page.url_path] for r in Redirect.objects.all()),
        "media": media_files(),
        "search": {q: sorted(p.title for p in Page.objects.live().search(q)) for q in ("Bravo", "Alpha", "Charlie")},
        "image_search": sorted(i.title for i in get_image_model().objects.search("Sunset")),
    }


if __name__ == "__main__":
    main({"operate": operate, "dump": dump})
