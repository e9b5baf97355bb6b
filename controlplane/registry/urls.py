"""Routes under ``/schema-registry/<kafka_cluster_id>/``: Confluent's paths, with or without a trailing slash.

A subject may contain ``/`` (sent as ``%2F``, which arrives decoded): Confluent's serializers name a Protobuf
dependency's subject after its import path (``google/type/money.proto``), so a subject matches lazily up to the
path's known tail, the longer tails tried first."""

from __future__ import annotations

from django.urls import re_path

from controlplane.registry import views

S = r"(?P<subject>.+?)"
V = r"(?P<version>[^/]+)"
ID = r"(?P<schema_id>[^/]+)"

urlpatterns = [
    re_path(r"^$", views.RootView.as_view()),
    re_path(r"^subjects/?$", views.SubjectsView.as_view()),
    re_path(rf"^subjects/{S}/versions/{V}/schema/?$", views.VersionSchemaView.as_view()),
    re_path(rf"^subjects/{S}/versions/{V}/referencedby/?$", views.ReferencedByView.as_view()),
    re_path(rf"^subjects/{S}/versions/{V}/?$", views.VersionView.as_view()),
    re_path(rf"^subjects/{S}/versions/?$", views.VersionsView.as_view()),
    re_path(rf"^subjects/{S}/?$", views.SubjectView.as_view()),
    re_path(r"^schemas/types/?$", views.SchemaTypesView.as_view()),
    re_path(rf"^schemas/ids/{ID}/?$", views.SchemaByIdView.as_view()),
    re_path(rf"^schemas/ids/{ID}/schema/?$", views.SchemaTextByIdView.as_view()),
    re_path(rf"^schemas/ids/{ID}/versions/?$", views.SchemaVersionsView.as_view()),
    re_path(rf"^schemas/ids/{ID}/subjects/?$", views.SchemaSubjectsView.as_view()),
    re_path(rf"^compatibility/subjects/{S}/versions/{V}/?$", views.CompatibilityView.as_view()),
    re_path(rf"^compatibility/subjects/{S}/versions/?$", views.CompatibilityView.as_view()),
    re_path(r"^config/?$", views.ConfigView.as_view()),
    re_path(rf"^config/{S}/?$", views.ConfigView.as_view()),
    re_path(r"^contexts/?$", views.ContextsView.as_view()),
    re_path(r"^mode/?$", views.ModeView.as_view()),
    re_path(rf"^mode/{S}/?$", views.ModeView.as_view()),
    re_path(r"^(?P<rest>.*)$", views.NotFoundView.as_view()),
]
