from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from foley_platform import accounts
from raters import views as raters_views
from raters.delivery import RECEIPT_PATH
from stimuli import views as stimuli_views
from stimuli.permissions import ApiDocsPermission

# Every organizer page of a challenge is under /organize/<challenge>/; a stage's pages under
# /organize/<challenge>/<stage>/, so no challenge name can collide with a stage's.
STAGES = ("generators", "objective", "listening", "text-prompts")
# The listening test's addresses share the raters' word: /listen/ (raters), /organize/<challenge>/
# listen/ (its organizer's page), /api/listen/ (its API). The earlier "listening" ones redirect.
RENAMED = {"listening": "listen"}


def moved(request: HttpRequest, target: str) -> HttpResponse:
    """A permanent redirect to `target` with the request's query (308 keeps a form's POST a
    POST)."""
    if request.META.get("QUERY_STRING"):
        target += f"?{request.META['QUERY_STRING']}"
    if request.method in ("GET", "HEAD"):
        return HttpResponsePermanentRedirect(target)
    response = HttpResponse(status=308)
    response["Location"] = target
    return response


def stage_moved(request: HttpRequest, stage: str, slug: str, rest: str) -> HttpResponse:
    """An address of the earlier /organize/<stage>/<challenge>/... form, sent to its page now."""
    return moved(request, f"/organize/{slug}/{RENAMED.get(stage, stage)}/{rest}")


def listening_moved(request: HttpRequest, slug: str, rest: str) -> HttpResponse:
    """/organize/<challenge>/listening/..., the listening test's earlier organizer address."""
    return moved(request, f"/organize/{slug}/listen/{rest}")


def api_listening_moved(request: HttpRequest, rest: str) -> HttpResponse:
    """/api/listening/..., the listening test's earlier API address."""
    return moved(request, f"/api/listen/{rest}")


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    # Resolved per request: the static files' manifest may not exist when URLs are loaded.
    return HttpResponsePermanentRedirect(static("favicon.svg"))


urlpatterns = [
    # First: the raters' requests are most of all requests (the patterns are tried in order).
    path("listen/", include("raters.urls")),
    # Under nginx's internal /_sounds/ location: only nginx's post_action reaches it.
    # (Behind gunicorn it does not come this way: foley_platform.middleware.receipts_first.)
    path(RECEIPT_PATH.lstrip("/"), raters_views.delivered, name="sound-delivered"),
    path("", stimuli_views.home, name="home"),
    # Browsers and feed readers that ignore the page's icon link ask here.
    path("favicon.ico", favicon),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "accounts/password-reset/",
        accounts.PasswordResetView.as_view(),
        name="password_reset",
    ),
    path(
        "accounts/password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "accounts/reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "accounts/reset/done/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
    path("admin/", admin.site.urls),
    path("organize/<slug:slug>/generators/", include("stimuli.generators.urls")),
    path("organize/<slug:slug>/objective/", include("stimuli.objective.urls")),
    path("organize/<slug:slug>/listen/", include("raters.organize_urls")),
    re_path(r"^organize/(?P<slug>[-a-zA-Z0-9_]+)/listening/(?P<rest>.*)$", listening_moved),
    path("organize/<slug:slug>/text-prompts/", include("raters.text_prompts.organize_urls")),
    path("organize/<slug:slug>/submissions/", include("stimuli.submissions.organize_urls")),
    path("organize/", include("stimuli.urls")),
    re_path(
        rf"^organize/(?P<stage>{'|'.join(STAGES)})/(?P<slug>[-a-zA-Z0-9_]+)/(?P<rest>.*)$",
        stage_moved,
    ),
    # The teams' pages: a challenge's public timeline, sign-up, and each team's own pages.
    path("teams/", include("stimuli.submissions.urls")),
    path("api/results/", include("scoring.api_urls")),
    path("api/listen/", include("raters.api_urls")),
    re_path(r"^api/listening/(?P<rest>.*)$", api_listening_moved),
    path(
        "api/challenges/<slug:challenge_slug>/submissions/",
        include("stimuli.submissions.api_urls"),
    ),
    path("api/", include("stimuli.api_urls")),
    path("results/", include("scoring.urls")),
    path(
        "api/schema/",
        SpectacularAPIView.as_view(permission_classes=[ApiDocsPermission]),
        name="api-schema",
    ),
    # The split view serves its start-up script as a file: no inline script under the CSP.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(
            url_name="api-schema", permission_classes=[ApiDocsPermission]
        ),
        name="api-docs",
    ),
]
