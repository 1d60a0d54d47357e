from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from . import views

# The API docs viewers inject styles and Redoc runs a worker from a blob; they show the schema only (docs/deploy.md).
DOCS_CSP = {"style-src": ["'unsafe-inline'"], "worker-src": ["blob:"]}

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    # Browsers ask for /favicon.ico whatever the page links; the icon is one SVG among the static files.
    path("favicon.ico", views.favicon, name="favicon"),
    path("switch-team/", views.switch_team, name="switch-team"),
    path("teams/<slug:slug>/keys/", views.agent_keys, name="agent-keys"),
    path("keys/<int:pk>/revoke/", views.revoke_agent_key, name="revoke-agent-key"),
    path("teams/<slug:slug>/members/", views.members, name="members"),
    path("teams/<slug:slug>/members/add/", views.add_member, name="member-add"),
    path("teams/<slug:slug>/members/invite/", views.invite_member, name="member-invite"),
    path("teams/<slug:slug>/members/<int:pk>/role/", views.change_member_role, name="member-role"),
    path("teams/<slug:slug>/members/<int:pk>/remove/", views.remove_member, name="member-remove"),
    path("teams/<slug:slug>/invitations/<int:pk>/revoke/", views.revoke_invitation, name="invitation-revoke"),
    path("teams/<slug:slug>/join/<str:token>/", views.join, name="join"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("memory/", include("memory.urls")),
    path("skills/", include("skills_registry.urls")),
    path("reviews/", include("reviews.urls")),
    path("api/v1/", include("dreamweb.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start script as a file: no inline script under the Content-Security-Policy.
    path("api/docs/", csp_update(DOCS_CSP)(SpectacularSwaggerSplitView.as_view(url_name="schema")), name="api-docs"),
    path("api/redoc/", csp_update(DOCS_CSP)(SpectacularRedocView.as_view(url_name="schema")), name="api-redoc"),
]

# Under /api/ every error is JSON (dreamweb.errors); pages get the branded error pages.
handler400 = "dreamweb.errors.bad_request"
handler403 = "dreamweb.errors.permission_denied"
handler404 = "dreamweb.errors.not_found"
handler500 = "dreamweb.errors.server_error"
