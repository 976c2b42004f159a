from django.urls import path

from . import objective_views

app_name = "objective"
urlpatterns = [
    path("<slug:slug>/", objective_views.panel, name="panel"),
    path("<slug:slug>/settings/", objective_views.save_settings, name="settings"),
    path("<slug:slug>/start/<str:pipeline>/", objective_views.start, name="start"),
    path("<slug:slug>/jobs/<int:job_id>/", objective_views.job, name="job"),
    path("<slug:slug>/jobs/<int:job_id>/retry/", objective_views.retry, name="retry"),
    path(
        "<slug:slug>/clip-fad/<int:system_id>/<slug:category>/",
        objective_views.clip_fad,
        name="clip_fad",
    ),
]
