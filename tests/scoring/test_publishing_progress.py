"""The publish action answers at once: the job runs apart (on a thread of the web process when
there is no broker, as in the demo) and its page shows each step and the time taken, then opens
the snapshot; a publication refused says why on the same page."""

from __future__ import annotations

import pytest

from scoring import services
from scoring.job_kinds import PUBLISH
from scoring.models import Snapshot
from stimuli.models import Job
from tests.conftest import wait_for_job

pytestmark = pytest.mark.django_db(transaction=True)


def test_publishing_answers_at_once_and_its_page_follows_the_job(
    organizer_client, challenge, settings, held_plots
):
    settings.FOLEY_TASKS_IN_BACKGROUND = True
    scoring = services.scoring_settings(challenge)
    scoring.bootstrap_samples = 20
    scoring.save()
    drawing, release = held_plots
    try:
        response = organizer_client.post(f"/results/{challenge.slug}/publish/", {"kind": "interim"})
        job = Job.objects.get(kind=PUBLISH)
        page_url = f"/results/{challenge.slug}/publish/{job.pk}/"
        assert response.status_code == 302 and response["Location"] == page_url
        assert drawing.wait(60), "the job never reached the plots"
        page = organizer_client.get(page_url).content.decode()
        assert "Step 3 of 4: drawing the plots" in page and "so far" in page
        assert 'hx-trigger="every 1s"' in page and "<h1>Publishing</h1>" in page
        polled = organizer_client.get(page_url, headers={"HX-Request": "true"})
        assert polled.content.decode().startswith('<section class="card publishing"')
        assert Snapshot.objects.count() == 0
    finally:
        release.set()
    assert wait_for_job(job.pk, timeout=60).state == Job.State.SUCCEEDED
    polled = organizer_client.get(page_url, headers={"HX-Request": "true"})
    assert polled["HX-Redirect"] == f"/results/{challenge.slug}/1/"
    opened = organizer_client.get(page_url)
    assert opened.status_code == 302 and opened["Location"] == f"/results/{challenge.slug}/1/"
    assert (
        "Published interim results #1." in organizer_client.get(opened["Location"]).content.decode()
    )


def test_a_refused_publication_says_why_on_its_page(organizer_client, challenge, organizer):
    services.publish(challenge, organizer)  # final: no interim snapshot after it
    response = organizer_client.post(f"/results/{challenge.slug}/publish/", {"kind": "interim"})
    page = organizer_client.get(response["Location"]).content.decode()
    assert "Nothing was published: the results are final" in page
    assert 'hx-trigger="every 1s"' not in page  # a finished job is not polled
    assert Snapshot.objects.count() == 1


def test_only_the_challenges_organizers_see_its_publications(
    client, challenge, organizer, organizer_of
):
    from stimuli.services import create_challenge

    job = services.request_publication(challenge, organizer, final=False, public=False)
    other = organizer_of(create_challenge(name="Other", slug="other"))
    client.force_login(other)
    assert client.get(f"/results/{challenge.slug}/publish/{job.pk}/").status_code == 403
    # A job of another challenge is not found under this one's address.
    assert client.get(f"/results/other/publish/{job.pk}/").status_code == 404
