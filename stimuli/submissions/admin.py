"""The admin's view of the teams' side: schedules to set dates and limits, and the records."""

from django.contrib import admin

from .models import (
    ChallengeSchedule,
    DeadlineExtension,
    Disqualification,
    Submission,
    TeamInvitation,
    TeamMembership,
    TeamRegistration,
)


@admin.register(ChallengeSchedule)
class ChallengeScheduleAdmin(admin.ModelAdmin):
    list_display = ("challenge", "time_zone", "development_opens", "submission_deadline")


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ("system", "version", "team", "state", "created_at", "disqualified_at")
    list_filter = ("state", "challenge")
    # Versions are immutable records: the admin reads them.
    readonly_fields = [f.name for f in Submission._meta.fields]


@admin.register(Disqualification)
class DisqualificationAdmin(admin.ModelAdmin):
    list_display = ("submission", "team", "disqualified_at", "lifted_at")
    list_filter = ("challenge",)
    # Disqualified and lifted on the organizer's page, with the challenge's lock: here, read.
    readonly_fields = [f.name for f in Disqualification._meta.fields]


admin.site.register(TeamMembership)
admin.site.register(TeamInvitation)
admin.site.register(TeamRegistration)
admin.site.register(DeadlineExtension)
