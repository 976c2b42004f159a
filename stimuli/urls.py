from django.urls import path

from . import views

app_name = "stimuli"
urlpatterns = [
    path("", views.challenges, name="challenges"),
    path("<slug:slug>/", views.challenge_detail, name="challenge"),
]
