from django.urls import path

from . import views

app_name = "generators"
urlpatterns = [
    path("<slug:slug>/", views.panel, name="panel"),
    path("<slug:slug>/systems/<int:system_id>/code/", views.set_code, name="code"),
    path("<slug:slug>/systems/<int:system_id>/trust/", views.trust, name="trust"),
    path("<slug:slug>/systems/<int:system_id>/generate/", views.generate, name="generate"),
    path("<slug:slug>/jobs/<int:job_id>/", views.job, name="job"),
    path("<slug:slug>/jobs/<int:job_id>/retry/", views.retry, name="retry"),
]
