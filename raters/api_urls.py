from django.urls import path

from . import api

CHALLENGE = "challenges/<slug:challenge_slug>"
urlpatterns = [
    path(f"{CHALLENGE}/ratings/", api.RatingsView.as_view(), name="listening-ratings"),
    path(f"{CHALLENGE}/diversity/", api.DiversityView.as_view(), name="listening-diversity"),
    path(f"{CHALLENGE}/crowd/", api.CrowdView.as_view(), name="listening-crowd"),
    path(f"{CHALLENGE}/progress/", api.ProgressView.as_view(), name="listening-progress"),
]
