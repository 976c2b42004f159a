from django.urls import path

from . import views

app_name = "generators"
urlpatterns = [
    path("", views.panel, name="panel"),
    path("systems/<int:system_id>/code/", views.set_code, name="code"),
    path("systems/<int:system_id>/trust/", views.trust, name="trust"),
    path("systems/<int:system_id>/generate/", views.generate, name="generate"),
    path("jobs/<int:job_id>/", views.job, name="job"),
    path("jobs/<int:job_id>/retry/", views.retry, name="retry"),
]
