"""URL map. Every tenant object lives under /api/v1/tenants/{tenant_slug}/."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from controlplane.clusters.views import ClusterViewSet, RebalanceViewSet
from controlplane.core.console import NOT_CONSOLE, console_asset, console_index
from controlplane.core.views import HealthView
from controlplane.kafkarest.v2.urls import root_urlpatterns as rest_v2_root
from controlplane.kafkarest.views import not_found as rest_not_found
from controlplane.reports.views import ReportRunViewSet, ReportViewSet
from controlplane.resources.views import AclViewSet, ClientQuotaViewSet, TopicViewSet
from controlplane.tenancy.audit_views import AuditEventViewSet
from controlplane.tenancy.auth_views import JoinView, LoginView, LogoutView, PasswordChangeView
from controlplane.tenancy.views import (
    ApiKeyViewSet,
    InvitationViewSet,
    MembershipViewSet,
    MeView,
    MyInvitationViewSet,
    PrincipalViewSet,
    ServiceAccountViewSet,
    TenantViewSet,
)

TENANT = r"tenants/(?P<tenant_slug>[^/]+)"
CLUSTER = TENANT + r"/clusters/(?P<cluster_pk>[^/]+)"

class OptionalSlashRouter(SimpleRouter):
    """Accept paths with or without a trailing slash (no redirects that drop a POST body)."""

    def __init__(self) -> None:
        super().__init__()
        self.trailing_slash = "/?"


router = OptionalSlashRouter()
router.register(r"tenants", TenantViewSet, basename="tenant")
router.register(r"invitations", MyInvitationViewSet, basename="invitation")
router.register(TENANT + r"/members", MembershipViewSet, basename="member")
router.register(TENANT + r"/invitations", InvitationViewSet, basename="tenant-invitation")
router.register(TENANT + r"/service-accounts", ServiceAccountViewSet, basename="service-account")
router.register(TENANT + r"/api-keys", ApiKeyViewSet, basename="api-key")
router.register(TENANT + r"/principals", PrincipalViewSet, basename="principal")
router.register(TENANT + r"/audit-events", AuditEventViewSet, basename="audit-event")
router.register(TENANT + r"/clusters", ClusterViewSet, basename="cluster")
router.register(CLUSTER + r"/topics", TopicViewSet, basename="topic")
router.register(CLUSTER + r"/acls", AclViewSet, basename="acl")
router.register(CLUSTER + r"/quotas", ClientQuotaViewSet, basename="quota")
router.register(CLUSTER + r"/rebalances", RebalanceViewSet, basename="rebalance")
router.register(CLUSTER + r"/reports", ReportViewSet, basename="report")
router.register(CLUSTER + r"/reports/(?P<report_pk>[^/]+)/runs", ReportRunViewSet, basename="report-run")

api_v1 = [
    re_path(r"^me/?$", MeView.as_view(), name="me"),
    re_path(r"^auth/login/?$", LoginView.as_view(), name="login"),
    re_path(r"^auth/logout/?$", LogoutView.as_view(), name="logout"),
    re_path(r"^auth/password/?$", PasswordChangeView.as_view(), name="password-change"),
    re_path(r"^auth/join/?$", JoinView.as_view(), name="join"),
    *router.urls,
]

urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("kafka/", include("controlplane.kafkarest.urls")),
    # The Schema Registry of one cluster (Confluent's API; its schema.registry.url): decision 0026.
    re_path(r"^schema-registry/(?P<kafka_cluster_id>[^/]+)/?", include("controlplane.registry.urls")),
    path("api/schema/", SpectacularAPIView.as_view(api_version="v1"), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("healthz", HealthView.as_view(), name="healthz"),
    path("admin/", admin.site.urls),
    # REST Proxy v2 at the root of the host (/topics, /consumers, /brokers), as v2 clients build their paths:
    # for API keys scoped to one cluster.
    *rest_v2_root,
    # Anything else under /kafka/ or a v2 root: the REST Proxy's 404 body (Confluent's), not the management API's
    # nor the console's page.
    re_path(r"^(?P<path>(?:kafka|topics|consumers|brokers)(?:/.*)?)$", rest_not_found, name="kafkarest-not-found"),
    # The web console (frontend/dist): hashed assets, then index.html for every client route (last: the API's
    # paths above always win).
    re_path(r"^assets/(?P<path>.+)$", console_asset, name="console-asset"),
    re_path(NOT_CONSOLE, console_index, name="console"),
]

handler400 = "controlplane.core.errors.json_bad_request"
handler403 = "controlplane.core.errors.json_permission_denied"
handler404 = "controlplane.core.errors.json_not_found"
handler500 = "controlplane.core.errors.json_server_error"
