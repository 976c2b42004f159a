"""Raters' pages, under /listen/."""

from django.urls import path

from . import views

app_name = "raters"
urlpatterns = [
    path("<slug:slug>/", views.home, name="home"),
    path("<slug:slug>/join/<str:key>/", views.join, name="join"),
    path("<slug:slug>/crowd/<str:key>/", views.crowd, name="crowd"),
    path("<slug:slug>/consent/", views.consent, name="consent"),
    path("<slug:slug>/instructions/", views.instructions, name="instructions"),
    path("<slug:slug>/start/", views.start_trials, name="start"),
    path("<slug:slug>/rate/", views.rate, name="rate"),
    path("<slug:slug>/next/", views.next_category, name="next"),
    path("<slug:slug>/finish/", views.finish, name="finish"),
    path("<slug:slug>/audio/<str:token>/", views.audio, name="audio"),
    path("<slug:slug>/player/", views.player_event, name="player"),
    path("<slug:slug>/diversity/", views.diversity, name="diversity"),
    path("<slug:slug>/diversity/rate/", views.rate_diversity, name="rate_diversity"),
]
