"""Organizers' listening-test pages, under /organize/listening/."""

from django.urls import path

from . import organize

app_name = "listening"
urlpatterns = [
    path("<slug:slug>/", organize.monitor, name="monitor"),
    path("<slug:slug>/progress/", organize.progress, name="progress"),
    path("<slug:slug>/prepare/", organize.prepare, name="prepare"),
    path("<slug:slug>/open/", organize.set_open, name="open"),
    path("<slug:slug>/invite/", organize.invite, name="invite"),
    path("<slug:slug>/gold/", organize.add_gold, name="add_gold"),
    path("<slug:slug>/accounts/", organize.add_account, name="add_account"),
    path("<slug:slug>/diversity/", organize.rate_diversity, name="rate_diversity"),
    path("<slug:slug>/ratings.csv", organize.ratings_csv, name="ratings_csv"),
    path("<slug:slug>/diversity.csv", organize.diversity_csv, name="diversity_csv"),
    path("<slug:slug>/crowd.csv", organize.crowd_csv, name="crowd_csv"),
    path("<slug:slug>/screening/", organize.screening_settings, name="screening"),
    path("<slug:slug>/screening.csv", organize.screening_csv, name="screening_csv"),
]
