from django.urls import path

from . import generator_views

app_name = "generators"
urlpatterns = [
    path("<slug:slug>/", generator_views.panel, name="panel"),
    path("<slug:slug>/systems/<int:system_id>/code/", generator_views.set_code, name="code"),
    path("<slug:slug>/systems/<int:system_id>/trust/", generator_views.trust, name="trust"),
    path(
        "<slug:slug>/systems/<int:system_id>/generate/", generator_views.generate, name="generate"
    ),
    path("<slug:slug>/jobs/<int:job_id>/", generator_views.job, name="job"),
    path("<slug:slug>/jobs/<int:job_id>/retry/", generator_views.retry, name="retry"),
]
