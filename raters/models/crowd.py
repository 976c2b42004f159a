"""What the crowd platform says of each participant: its submissions export, loaded by the
organizers (`raters.platform`), against which the crowd workers' ratings are reconciled."""

from __future__ import annotations

from django.db import models

from .listening import ListeningTest


class PlatformSubmission(models.Model):
    """One row of the crowd platform's submissions export (Prolific's: participant id, status,
    submission id, started and completed times). The export is loaded whole: every row of the
    previous one is replaced."""

    test = models.ForeignKey(
        ListeningTest, on_delete=models.CASCADE, related_name="platform_submissions"
    )
    participant_id = models.CharField(max_length=64)
    submission_id = models.CharField(max_length=64, blank=True)
    status = models.CharField(
        max_length=32, help_text="As the platform writes it, in capitals (e.g. APPROVED)."
    )
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["test", "participant_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["test", "participant_id"], name="platform_submission_participant_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.participant_id}: {self.status}"
