"""A disqualification sticks: the disqualified archive, the same files repacked, and its model
data are refused afterwards, as a new version and as a new system, from the team page and the
team's CI API, until an organizer lifts it with a reason.

Checks are queued on a broker no worker reads; a version that must count is marked valid, as
the worker would have."""

from __future__ import annotations

import io
import random
import zipfile

import pytest
from django.core import mail
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from stimuli.errors import Conflict, Refused
from stimuli.models import Generator, Team
from stimuli.submissions.models import Disqualification, Submission
from stimuli.submissions.services import (
    disqualify,
    lift_disqualification,
    submit,
    sync_generator,
)

from .conftest import baseline_archive, meta, upload

pytestmark = pytest.mark.django_db

PACKAGE = "foley_baseline"


def repack(data: bytes, extra: dict[str, bytes] | None = None, drop=()) -> bytes:
    """The same files in another zip: other order, no compression, maybe a file more."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        files = {info.filename: zf.read(info) for info in zf.infolist()}
    for name in drop:
        files.pop(name)
    files.update(extra or {})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
        for name in sorted(files, reverse=True):
            zf.writestr(name, files[name])
    return buffer.getvalue()


@pytest.fixture
def barkers(make_member):
    user = make_member("Barkers", "ann")
    return user, Team.objects.get(name="Barkers")


def _valid(submission: Submission) -> Submission:
    Submission.objects.filter(pk=submission.pk).update(state=Submission.State.VALID)
    submission.refresh_from_db()
    return submission


RETRAINED = random.Random(7).randbytes(4096)


@pytest.fixture
def disqualified(open_challenge, barkers, organizer, queued_only):
    """v1 stands; v2, with retrained weights, is disqualified."""
    user, team = barkers
    _valid(submit(team, user, meta(), upload(baseline_archive())))
    data = baseline_archive(weights=RETRAINED, code_suffix="\n# v2\n")
    second = _valid(submit(team, user, meta(), upload(data)))
    found = disqualify(second, reason="Trained on the evaluation set", by=organizer)
    return user, team, second, found, data


def test_the_disqualified_archive_is_refused_as_a_new_version_and_a_new_system(disqualified):
    user, team, second, found, data = disqualified
    assert found.archive_sha256 == second.archive_sha256 and found.standing
    assert set(found.model_data.values()) == {f"{PACKAGE}/weights.npy"}  # v1's weights stand
    before = Submission.objects.count()
    for system in ("Barker", "Barker again"):
        with pytest.raises(Conflict) as refused:
            submit(team, user, meta(system), upload(data))
        assert refused.value.problems == [
            "archive: this is the archive of Barker v2 was disqualified (Trained on the "
            "evaluation set); it stays refused until the organizers lift the disqualification"
        ]
    assert Submission.objects.count() == before


def test_repacked_files_and_reused_model_data_are_refused(disqualified):
    user, team, _, _, data = disqualified
    with pytest.raises(Conflict, match="archive: it holds every file of Barker v2"):
        submit(team, user, meta("New"), upload(repack(data, {"README.md": b"new\n"})))
    # Other code, the disqualified weights under another name: the file is named.
    other = repack(
        baseline_archive(code_suffix="\n# other\n"),
        {f"{PACKAGE}/w.npy": RETRAINED},
        drop=[f"{PACKAGE}/weights.npy"],
    )
    with pytest.raises(Conflict) as refused:
        submit(team, user, meta("New"), upload(other))
    assert refused.value.problems == [
        f"archive: {PACKAGE}/w.npy is {PACKAGE}/weights.npy of Barker v2 was disqualified "
        "(Trained on the evaluation set); it stays refused until the organizers lift the "
        "disqualification"
    ]
    # The weights of the version in good standing are the team's still.
    fix = submit(team, user, meta(), upload(baseline_archive(code_suffix="\n# v3\n")))
    assert fix.version == 3


def test_another_team_is_not_refused_the_same_archive(disqualified, make_member):
    """Refused per team: the team whose code another copied may still submit its own."""
    *_, data = disqualified
    bob = make_member("Rivals", "bob")
    assert submit(Team.objects.get(name="Rivals"), bob, meta("Copy"), upload(data)).version == 1


def test_refused_through_the_team_page_and_the_ci_api(disqualified):
    user, _, _, _, data = disqualified
    page = Client()
    page.force_login(user)
    response = page.post(
        reverse("teams:submit", args=["teams"]),
        {"system": "Barker", "track": "A", "licence": "MIT", "archive": upload(data)},
    )
    html = response.content.decode()
    assert response.status_code == 409 and "this is the archive of Barker v2" in html
    assert (
        "Trained on the evaluation set"
        in page.get(reverse("teams:team", args=["teams"])).content.decode()
    )
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    for system in ("Barker", "CI system"):
        response = api.post(
            "/api/challenges/teams/submissions/",
            {"system": system, "track": "A", "licence": "MIT", "archive": upload(data)},
            format="multipart",
        )
        assert response.status_code == 409
        assert response.json()["errors"][0].startswith("archive: this is the archive of Barker v2")
    assert Submission.objects.count() == 2


def test_an_organizer_lifts_it_with_a_reason(disqualified, organizer, organizer_client):
    user, team, second, found, data = disqualified
    with pytest.raises(Refused, match="reason: say why"):
        lift_disqualification(found, reason=" ", by=organizer)
    response = organizer_client.post(
        reverse("submissions_organize:lift", args=["teams", found.pk]),
        {"reason": "The data was the development set after all"},
    )
    assert response.status_code == 302
    found.refresh_from_db()
    second.refresh_from_db()
    assert not found.standing and found.lifted_by == organizer
    assert second.disqualified_at is None and second.disqualified_reason == ""
    assert "lifted" in mail.outbox[-1].subject and "development set" in mail.outbox[-1].body
    with pytest.raises(Conflict, match="lifted already"):
        lift_disqualification(found, reason="again", by=organizer)
    page = organizer_client.get(reverse("submissions_organize:index", args=["teams"]))
    assert "The data was the development set after all" in page.content.decode()
    # Its content is accepted again.
    assert submit(team, user, meta("Barker again"), upload(data)).version == 1


def test_disqualifying_twice_is_refused_and_the_database_keeps_one_standing(
    disqualified, organizer
):
    _, _, second, found, _ = disqualified
    with pytest.raises(Conflict, match="disqualified already"):
        disqualify(second, reason="Again", by=organizer)
    with pytest.raises(IntegrityError), transaction.atomic():
        Disqualification.objects.create(
            challenge=found.challenge, team=found.team, system=found.system,
            submission=second, reason="Again", archive_sha256=found.archive_sha256,
        )  # fmt: skip
    with pytest.raises(IntegrityError), transaction.atomic():
        Disqualification.objects.filter(pk=found.pk).update(lifted_at=timezone.now())


def test_when_no_version_counts_its_generator_does_not_run(
    open_challenge, barkers, organizer, queued_only
):
    user, team = barkers
    only = _valid(submit(team, user, meta(), upload(baseline_archive())))
    sync_generator(only.system)
    assert Generator.objects.get(system=only.system).state == Generator.State.VALID
    found = disqualify(only, reason="Copied", by=organizer)
    assert Generator.objects.get(system=only.system).state == Generator.State.INVALID
    lift_disqualification(found, reason="Not copied", by=organizer)
    assert Generator.objects.get(system=only.system).state == Generator.State.VALID
