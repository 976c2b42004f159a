from django.urls import path

from . import views

app_name = "objective"
urlpatterns = [
    path("<slug:slug>/", views.panel, name="panel"),
    path("<slug:slug>/settings/", views.save_settings, name="settings"),
    path("<slug:slug>/start/<str:step>/", views.start, name="start"),
    path("<slug:slug>/jobs/<int:job_id>/", views.job, name="job"),
    path("<slug:slug>/jobs/<int:job_id>/retry/", views.retry, name="retry"),
    path(
        "<slug:slug>/clip-fad/<int:system_id>/<slug:category>/",
        views.clip_fad,
        name="clip_fad",
    ),
]
