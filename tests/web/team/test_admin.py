"""The admin pages for every model answer, with real rows in them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from blobviewer.models import Blob, BlobRef, Item, Session, ShareLink

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", [Session, Item, Blob, BlobRef, ShareLink])
def test_each_model_has_a_changelist_and_a_change_page(admin_client, sample_session, user, model):
    ShareLink.objects.create(
        blob_id=sample_session.text_blob, selector="lines:1-5", created_by=user
    )
    name = model._meta.model_name

    changelist = admin_client.get(reverse(f"admin:blobviewer_{name}_changelist"))
    assert changelist.status_code == 200

    row = model.objects.first()
    change = admin_client.get(reverse(f"admin:blobviewer_{name}_change", args=[row.pk]))
    assert change.status_code == 200


def test_a_session_can_be_found_by_its_title(admin_client, sample_session):
    url = reverse("admin:blobviewer_session_changelist")
    html = admin_client.get(url, {"q": "Fix the build"}).content.decode()
    assert "1 session" in html
