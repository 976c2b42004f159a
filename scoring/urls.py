from django.urls import path

from . import views

app_name = "scoring"

urlpatterns = [
    path("", views.index, name="index"),
    path("<slug:slug>/", views.challenge_results, name="challenge"),
    path("<slug:slug>/publish/", views.publish, name="publish"),
    path("<slug:slug>/publish/<int:pk>/", views.publishing, name="publishing"),
    path("<slug:slug>/preview/", views.preview, name="preview"),
    path("<slug:slug>/<int:number>/", views.snapshot, name="snapshot"),
    path("<slug:slug>/<int:number>/release/", views.make_release, name="make_release"),
    path(
        "<slug:slug>/<int:number>/release/<int:pk>.zip",
        views.release_download,
        name="release_download",
    ),
    path("<slug:slug>/<int:number>/track/<str:code>/", views.track, name="track"),
    path(
        "<slug:slug>/<int:number>/track/<str:code>/<slug:kind>.<str:fmt>",
        views.plot,
        name="plot",
    ),
    path("<slug:slug>/<int:number>/definition.yaml", views.definition, name="definition"),
    path(
        "<slug:slug>/<int:number>/download/<slug:name>.<str:fmt>",
        views.download,
        name="download",
    ),
]
