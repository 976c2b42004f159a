"""Organizers' text-prompt study pages, under /organize/<challenge>/text-prompts/."""

from django.urls import path

from . import text_organize

app_name = "text_prompts"
urlpatterns = [
    path("", text_organize.page, name="page"),
    path("create/", text_organize.create, name="create"),
    path("reference/", text_organize.reference, name="reference"),
    path("open/", text_organize.set_open, name="open"),
    path("invite/", text_organize.invite, name="invite"),
    path("clap-scores/", text_organize.clap_scores, name="clap_scores"),
]
