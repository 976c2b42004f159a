"""The generators panel in a real headless Chromium, with a real worker running the jobs: attach
code, see the validation report, start generation and watch its progress live."""

from __future__ import annotations

import pytest

from stimuli.job_kinds import GENERATE
from stimuli.models import Job
from stimuli.services import create_challenge, create_system, create_team
from tests.chromium import chromium_page, log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.sandbox]


def test_organizer_attaches_code_and_watches_generation(
    live_server, celery_worker, chromium_path, organizer, tmp_path
):
    challenge = create_challenge(
        name="Panel", slug="panel", clip_duration_s=1.0, categories=[("rain", "Rain")]
    )
    team = create_team(challenge, name="Team")
    system = create_system(team=team, track=challenge.tracks.first(), name="Slow one")
    card = f"#generator-{system.pk}"
    with chromium_page(chromium_path) as page:
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        page.goto(f"{live_server.url}/organize/{challenge.slug}/")
        page.fill(f"#module-{system.pk}", "tests.generator_fixtures.slow")
        page.click(f"{card} form[hx-encoding] button[type=submit]")
        # Validation runs on the worker; the panel refreshes when its job finishes.
        page.wait_for_selector(f"{card} [data-state=valid]", timeout=60_000)
        assert "Valid generator" in page.inner_text(card)

        page.fill(f"{card} input[name=n_per_category]", "16")
        page.fill(f"{card} input[name=batch_size]", "2")
        page.click(f"{card} form.inline button[type=submit]")
        page.wait_for_selector(f"{card} .job[data-state=running] progress", timeout=60_000)
        # The latest log lines are on show while it runs.
        page.wait_for_selector(f"{card} .log-tail:has-text('stored (seed')", timeout=60_000)
        page.wait_for_selector(f"{card} .job[data-state=succeeded]", timeout=120_000)
        text = page.inner_text(card)
        assert "(16 of 16)" in text
        assert "rain: clips 15-16 stored" in page.inner_text(f"{card} .log-tail")
        page.screenshot(path=str(tmp_path / "generators.png"), full_page=True)
    job = Job.objects.get(kind=GENERATE)
    assert job.state == Job.State.SUCCEEDED and system.clips.count() == 16
