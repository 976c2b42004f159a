from django.apps import AppConfig


class StimuliConfig(AppConfig):
    """What is heard: challenges, categories, systems, clips, uploads, embeddings and metrics jobs."""

    name = "stimuli"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .job_kinds import register
        from .models import Job

        kind = Job.Kind
        register(
            kind.IMPORT, kind.IMPORT.label, "stimuli.tasks.import_upload",
            where="stimuli.uploads.tasks.import_upload",
            no_retry="An upload cannot be retried; upload the file again.",
        )  # fmt: skip
        for generation in (kind.GENERATE, kind.VALIDATE_GENERATOR):
            task = "generate_clips" if generation == kind.GENERATE else "generate_validation"
            register(
                generation, generation.label, f"stimuli.tasks.{task}",
                where=f"stimuli.generators.tasks.{task}",
                retry_guard="stimuli.generators.services.retry_guard",
            )  # fmt: skip
        # A team's submission: the organizer path's validation, example clips and FAD-dev.
        register(
            "validate_submission", "Submission check", "stimuli.tasks.check_submission",
            where="stimuli.submissions.tasks.check_submission",
            no_retry="A submission's check is re-run by an organizer from its page.",
        )  # fmt: skip
        # Clips from judges' prompts: a failed job runs again over the prompts still pending.
        register(
            kind.GENERATE_TEXT, kind.GENERATE_TEXT.label, "stimuli.tasks.generate_from_text",
            where="stimuli.generators.tasks.generate_from_text",
        )  # fmt: skip
        for objective, task in (
            (kind.EMBED, "embed_clips"),
            (kind.FAD, "compute_fad"),
            (kind.SELECT_MEDOIDS, "select_medoids"),
        ):
            register(
                objective, objective.label, f"stimuli.tasks.{task}",
                where=f"stimuli.objective.tasks.{task}",
                retry_guard="stimuli.objective.services.retry_guard",
            )  # fmt: skip
        # The text-prompt study's CLAP scores: a failed job runs again over the rows still empty.
        register(
            "clap_prompt_scores", "CLAP scores", "stimuli.tasks.clap_prompt_scores",
            where="stimuli.objective.tasks.clap_prompt_scores",
        )  # fmt: skip
