from django.urls import path

from . import api

urlpatterns = [
    path("", api.PublishedChallengeList.as_view(), name="results-api-challenges"),
    path("<slug:slug>/snapshots/", api.SnapshotList.as_view(), name="results-api-snapshots"),
    path("<slug:slug>/latest/", api.SnapshotDetail.as_view(), name="results-api-latest"),
    path(
        "<slug:slug>/snapshots/<int:number>/",
        api.SnapshotDetail.as_view(),
        name="results-api-snapshot",
    ),
    path(
        "<slug:slug>/snapshots/<int:number>/leaderboards/<str:code>/",
        api.LeaderboardDetail.as_view(),
        name="results-api-leaderboard",
    ),
]
