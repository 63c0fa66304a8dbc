"""Runs inside a django-pictures site's own process (its settings, its database), never in
the test suite's: ``python -m tests.clients.pictures_actions operate|dump|jobs|later``, from
the site's directory (site_actions.py has ``jobs`` and ``later``).

``operate`` uploads photos through Django's admin with the test client, as an editor would:
two added, one of them renamed, a third added and deleted. Every response is checked (no
500: the client re-raises a view's exception) and so is what each action did.

``dump`` prints the photos and the files in MEDIA_ROOT -- the originals, and the sizes
django-pictures' task renders -- so that boson's copy and the immediate backend's compare
equal when they agree.
"""

from __future__ import annotations

from tests.clients.site_actions import expect, logged_in_client, main, media_files, png


def upload(name: str, colour: tuple[int, int, int]):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, png(colour, size=(640, 480)), content_type="image/png")


def operate() -> dict:
    from gallery.models import Photo

    client = logged_in_client()
    added = []
    for title, name, colour in (("Harbour", "harbour.png", (20, 90, 160)), ("Dunes", "dunes.png", (200, 170, 90)),
                                ("Doomed", "doomed.png", (90, 20, 20))):
        expect(client.get("/admin/gallery/photo/add/"), 200, "open the photo form")
        data = {"title": title, "picture": upload(name, colour)}
        expect(client.post("/admin/gallery/photo/add/", data), 302, f"upload photo {title!r}")
        photo = Photo.objects.get(title=title)
        assert (photo.picture_width, photo.picture_height) == (640, 480), f"photo {title!r}: {photo.picture_width}x{photo.picture_height}"
        added.append(photo)
    harbour, _dunes, doomed = added

    expect(client.get(f"/admin/gallery/photo/{harbour.pk}/change/"), 200, "open the photo 'Harbour'")
    expect(client.post(f"/admin/gallery/photo/{harbour.pk}/change/", {"title": "Harbour at dusk"}), 302, "rename 'Harbour'")
    harbour.refresh_from_db()
    assert harbour.title == "Harbour at dusk", f"photo {harbour.pk}: title {harbour.title!r}"

    expect(client.get(f"/admin/gallery/photo/{doomed.pk}/delete/"), 200, "open the delete view of 'Doomed'")
    expect(client.post(f"/admin/gallery/photo/{doomed.pk}/delete/", {"post": "yes"}), 302, "delete 'Doomed'")
    assert not Photo.objects.filter(pk=doomed.pk).exists(), "photo 'Doomed' still exists after delete"
    return {"photos": [p.pk for p in added]}


def dump() -> dict:
    from gallery.models import Photo

    photos = sorted([p.pk, p.title, p.picture.name, p.picture_width, p.picture_height] for p in Photo.objects.all())
    return {"photos": photos, "media": media_files()}


if __name__ == "__main__":
    main({"operate": operate, "dump": dump})
