"""The teams' pages, under /teams/<challenge>/. Five are public (the timeline, an invitation
link, self-registration, the answer to both and its e-mail's link); every other is one team's
and asks `team_member_required`: the test of the URL configuration holds every route here to
that, except the ones PUBLIC names."""

from django.urls import path

from . import views

app_name = "teams"
PUBLIC = ("timeline", "join", "register", "sent", "confirm")
urlpatterns = [
    path("<slug:slug>/", views.timeline, name="timeline"),
    path("<slug:slug>/join/<str:token>/", views.join, name="join"),
    path("<slug:slug>/register/", views.register, name="register"),
    path("<slug:slug>/sent/", views.sent, name="sent"),
    path("<slug:slug>/confirm/<str:token>/", views.confirm, name="confirm"),
    path("<slug:slug>/team/", views.team, name="team"),
    path("<slug:slug>/team/submit/", views.submit, name="submit"),
    path("<slug:slug>/team/token/", views.api_token, name="token"),
    path("<slug:slug>/team/release-audio/", views.release_audio, name="release_audio"),
    path("<slug:slug>/team/submissions/<int:pk>/", views.submission, name="submission"),
    path("<slug:slug>/team/submissions/<int:pk>/status/", views.submission_status, name="status"),
    path("<slug:slug>/team/submissions/<int:pk>/choose/", views.choose, name="choose"),
    path("<slug:slug>/team/submissions/<int:pk>/clips/<int:clip_id>.wav", views.clip, name="clip"),
]
