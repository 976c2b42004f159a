from django.urls import path

from . import definition_views, views
from .uploads import views as uploads_views

app_name = "stimuli"
urlpatterns = [
    path("", views.challenges, name="challenges"),
    path("jobs/<int:pk>/", views.job_status, name="job"),
    path("audio/<str:sha256>.wav", views.audio, name="audio"),
    path("<slug:slug>/", views.challenge_detail, name="challenge"),
    path("<slug:slug>/teams/", views.add_team, name="add_team"),
    path("<slug:slug>/systems/", views.add_system, name="add_system"),
    path("<slug:slug>/upload/", uploads_views.upload, name="upload"),
    path("<slug:slug>/jobs/", views.jobs, name="jobs"),
    path("<slug:slug>/clips/", views.clips, name="clips"),
    path("<slug:slug>/counts/", views.clip_counts, name="clip_counts"),
    path("<slug:slug>/definition.yaml", definition_views.download, name="definition_download"),
    path("<slug:slug>/definition/", definition_views.check, name="definition_check"),
    path("<slug:slug>/definition/apply/", definition_views.apply, name="definition_apply"),
]
