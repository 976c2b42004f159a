"""Raters' pages, under /listen/."""

from django.urls import path

from . import screening_views, views
from .text_prompts import views as text_views

app_name = "raters"
urlpatterns = [
    # The requests of every trial first: patterns are tried in order.
    path("<slug:slug>/player/", views.player_event, name="player"),
    path("<slug:slug>/audio/<str:token>/", views.audio, name="audio"),
    path("<slug:slug>/rate/", views.rate, name="rate"),
    path("<slug:slug>/vote/", views.vote, name="vote"),
    path("<slug:slug>/", views.home, name="home"),
    path("<slug:slug>/join/<str:key>/", views.join, name="join"),
    path("<slug:slug>/crowd/<str:key>/", views.crowd, name="crowd"),
    path("<slug:slug>/consent/", views.consent, name="consent"),
    path("<slug:slug>/instructions/", views.instructions, name="instructions"),
    path("<slug:slug>/checks/", screening_views.page, name="screening"),
    path("<slug:slug>/checks/answer/", screening_views.answer, name="screening_answer"),
    path("<slug:slug>/checks/retry/", screening_views.retry, name="screening_retry"),
    path("<slug:slug>/start/", views.start_trials, name="start"),
    path("<slug:slug>/next/", views.next_category, name="next"),
    path("<slug:slug>/finish/", views.finish, name="finish"),
    path("<slug:slug>/diversity/", views.diversity_page, name="diversity"),
    path("<slug:slug>/diversity/rate/", views.rate_diversity, name="rate_diversity"),
    # The text-prompt protocol's judges.
    path("<slug:slug>/text/", text_views.home, name="text_home"),
    path("<slug:slug>/text/progress/", text_views.progress, name="text_progress"),
    path("<slug:slug>/text/begin/", text_views.begin, name="text_begin"),
    path("<slug:slug>/text/describe/", text_views.describe, name="text_describe"),
    path("<slug:slug>/text/mark/", text_views.mark, name="text_mark"),
    path("<slug:slug>/text/marks-done/", text_views.submit_marks, name="text_marks_done"),
    path("<slug:slug>/text/realism/", text_views.realism, name="text_realism"),
    path("<slug:slug>/text/prompt/", text_views.prompt, name="text_prompt"),
    path("<slug:slug>/text/answer/", text_views.answer_prompt, name="text_answer"),
]
