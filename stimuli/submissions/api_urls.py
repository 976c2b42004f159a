from rest_framework.routers import SimpleRouter

from . import api

router = SimpleRouter()
router.include_format_suffixes = False
router.register("", api.SubmissionViewSet, basename="team-submission")
urlpatterns = router.urls
