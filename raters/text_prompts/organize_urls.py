"""Organizers' text-prompt study pages, under /organize/<challenge>/text-prompts/."""

from django.urls import path

from . import organize

app_name = "text_prompts"
urlpatterns = [
    path("", organize.page, name="page"),
    path("create/", organize.create, name="create"),
    path("reference/", organize.reference, name="reference"),
    path("open/", organize.set_open, name="open"),
    path("invite/", organize.invite, name="invite"),
    path("clap-scores/", organize.clap_scores, name="clap_scores"),
    path("gold/", organize.gold, name="gold"),
]
