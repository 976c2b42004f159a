"""Organizers' text-prompt study pages, under /organize/text-prompts/."""

from django.urls import path

from . import text_organize

app_name = "text_prompts"
urlpatterns = [
    path("<slug:slug>/", text_organize.page, name="page"),
    path("<slug:slug>/create/", text_organize.create, name="create"),
    path("<slug:slug>/reference/", text_organize.reference, name="reference"),
    path("<slug:slug>/open/", text_organize.set_open, name="open"),
    path("<slug:slug>/invite/", text_organize.invite, name="invite"),
    path("<slug:slug>/gold/", text_organize.gold, name="gold"),
]
