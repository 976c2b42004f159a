from django.urls import path

from . import views

app_name = "objective"
urlpatterns = [
    path("", views.panel, name="panel"),
    path("settings/", views.save_settings, name="settings"),
    path("start/<str:step>/", views.start, name="start"),
    path("jobs/<int:job_id>/", views.job, name="job"),
    path("jobs/<int:job_id>/retry/", views.retry, name="retry"),
    path(
        "clip-fad/<int:system_id>/<slug:category>/",
        views.clip_fad,
        name="clip_fad",
    ),
]
