from django.urls import path
from rest_framework.routers import DefaultRouter

from . import api, definition_api
from .generators import api as generators_api
from .objective import api as objective_api
from .uploads import api as uploads_api

CHALLENGE = r"challenges/(?P<challenge_slug>[-a-zA-Z0-9_]+)"

# No `.json`-style suffix routes: `?format=` chooses a renderer, and the actions take no suffix.
router = DefaultRouter()
router.include_format_suffixes = False
router.register("challenges", api.ChallengeViewSet, basename="challenge")
router.register(f"{CHALLENGE}/teams", api.TeamViewSet, basename="team")
router.register(f"{CHALLENGE}/systems", api.SystemViewSet, basename="system")
router.register(f"{CHALLENGE}/clips", api.ClipViewSet, basename="clip")
router.register(f"{CHALLENGE}/uploads", uploads_api.UploadViewSet, basename="upload")
router.register(f"{CHALLENGE}/jobs", api.JobViewSet, basename="job")
router.register(f"{CHALLENGE}/generators", generators_api.GeneratorViewSet, basename="generator")
router.register(f"{CHALLENGE}/objective", objective_api.ObjectiveViewSet, basename="objective")
urlpatterns = [
    # Before the router's: its challenge detail would take "definition" for a slug.
    path(
        "challenges/definition/",
        definition_api.NewChallengeDefinitionView.as_view(),
        name="challenge-definition-new",
    ),
    path(
        "challenges/<slug:challenge_slug>/definition/",
        definition_api.ChallengeDefinitionView.as_view(),
        name="challenge-definition",
    ),
    path(
        "challenge-schema/", definition_api.ChallengeSchemaView.as_view(), name="challenge-schema"
    ),
    *router.urls,
]
