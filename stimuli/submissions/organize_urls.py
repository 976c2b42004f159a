"""The organizer's pages of the submission weeks: /organize/<challenge>/submissions/..."""

from django.urls import path

from . import organize

app_name = "submissions_organize"
urlpatterns = [
    path("", organize.index, name="index"),
    path("export.csv", organize.export, name="export"),
    path("schedule/", organize.set_schedule, name="schedule"),
    path("teams/", organize.add_team, name="add_team"),
    path("teams/<int:team_id>/invite/", organize.invite, name="invite"),
    path(
        "teams/<int:team_id>/invitations/<int:pk>/revoke/",
        organize.revoke,
        name="revoke_invitation",
    ),
    path("teams/<int:team_id>/decide/", organize.decide, name="decide"),
    path("teams/<int:team_id>/extend/", organize.extend, name="extend"),
    path("<int:pk>/diff/", organize.version_diff, name="diff"),
    path("<int:pk>/rerun/", organize.rerun, name="rerun"),
    path("<int:pk>/disqualify/", organize.disqualify, name="disqualify"),
    path("disqualifications/<int:pk>/lift/", organize.lift, name="lift"),
]
