"""Organizers' listening-test pages, under /organize/<challenge>/listen/."""

from django.urls import path

from . import organize

app_name = "listening"
urlpatterns = [
    path("", organize.monitor, name="monitor"),
    path("progress/", organize.progress, name="progress"),
    path("prepare/", organize.prepare, name="prepare"),
    path("open/", organize.set_open, name="open"),
    path("invite/", organize.invite, name="invite"),
    path("gold/", organize.add_gold, name="add_gold"),
    path("accounts/", organize.add_account, name="add_account"),
    path("diversity/", organize.rate_diversity, name="rate_diversity"),
    path("ratings.csv", organize.ratings_csv, name="ratings_csv"),
    path("diversity.csv", organize.diversity_csv, name="diversity_csv"),
    path("votes.csv", organize.votes_csv, name="votes_csv"),
    path("crowd.csv", organize.crowd_csv, name="crowd_csv"),
    path("platform/", organize.platform_export, name="platform_export"),
    path("screening/", organize.screening_settings, name="screening"),
    path("screening.csv", organize.screening_csv, name="screening_csv"),
]
