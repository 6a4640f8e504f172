"""Every URL of the site, in one list; each room's views.py serves its own."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from blobviewer.catalog import views as catalog
from blobviewer.compare import views as compare
from blobviewer.otlp import views as otlp
from blobviewer.reader import views as reader
from blobviewer.search import views as search
from blobviewer.team import views as team
from blobviewer.timeline import views as timeline

urlpatterns = [
    # /  and  /sessions/<id>/ (and one item whole: /sessions/<id>/items/<seq>/) — recorded runs
    path("", timeline.session_list, name="session_list"),
    path("sessions/<uuid:session_id>/", timeline.session_detail, name="session_detail"),
    path("sessions/<uuid:session_id>/items/<int:seq>/", timeline.item_detail, name="item_detail"),
    path("sessions/<uuid:session_id>/find", search.session_find, name="session_find"),
    path("sessions/<uuid:session_id>/live", timeline.session_live, name="session_live"),
    # /compare/<a>/<b>/ — two runs side by side, their steps aligned and outputs diffed
    path("compare/<uuid:a>/<uuid:b>/", compare.compare, name="compare"),
    path("compare/<uuid:a>/<uuid:b>/diff", compare.compare_diff, name="compare_diff"),
    path("sessions/<uuid:session_id>/compare/", compare.compare_pick, name="compare_pick"),
    # /blobs/ — stored outputs, read with the model's selectors
    path("blobs/", catalog.blob_list, name="blob_list"),
    path("blobs/<uuid:blob_id>/", reader.blob_detail, name="blob_detail"),
    path("blobs/<uuid:blob_id>/raw", reader.blob_raw, name="blob_raw"),
    path("blobs/<uuid:blob_id>/share", team.share_create, name="share_create"),
    # /api/ — what the model's inspect tool returns; sessions sent by agents (token auth)
    path("api/inspect/<uuid:blob_id>", reader.api_inspect, name="api_inspect"),
    path("api/sessions", team.api_ingest, name="api_ingest"),
    path("api/recordings", team.api_recordings, name="api_recordings"),
    # /v1/ — OpenTelemetry (OTLP/HTTP) exporters of instrumented agents (token auth)
    path("v1/traces", otlp.traces, name="otlp_traces"),
    path("v1/logs", otlp.logs, name="otlp_logs"),
    # /tokens/ — my API tokens, for agents that send sessions
    path("tokens/", team.token_list, name="token_list"),
    path("tokens/<int:token_id>/revoke", team.token_revoke, name="token_revoke"),
    # /shares/ (mine, to revoke) and /share/<token>/ (public, no login)
    path("shares/", team.share_list, name="share_list"),
    path("shares/<slug:token>/revoke", team.share_revoke, name="share_revoke"),
    path("share/<slug:token>/", team.share_detail, name="share_detail"),
    path("share/<slug:token>/raw", team.share_raw, name="share_raw"),
    # accounts and admin
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]
