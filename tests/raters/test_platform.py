"""The crowd platform's record reconciled with the crowd workers: an uploaded submissions export
takes out of the scoring every worker it does not list as valid, with the reason; the link's
study id is checked against the run's; a team member who comes in through the crowd link rates
as the team's member."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from raters import enrolment, platform, preparation, selectors
from raters.errors import ListeningError
from raters.models import ListeningTest, PlatformSubmission, Rater
from scoring.compute import score
from scoring.rules import Rules
from scoring.services import collect_inputs
from stimuli.submissions.teams import join
from tests.listening_setup import answer_session, build_listening_challenge

pytestmark = pytest.mark.django_db

HEADER = "Submission id,Participant id,Status,Started at,Completed at,Time taken\n"


@pytest.fixture
def run():
    challenge = build_listening_challenge(
        slug="platform", categories=1, target_ratings=20, categories_min=1
    )
    preparation.set_open(challenge, True)
    return challenge


def _worker(challenge, participant: str, session: str) -> Rater:
    key = selectors.listening_test(challenge).crowd_key
    rater = enrolment.enrol_crowd(challenge, key, participant_id=participant, session_id=session)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    from raters import sessions

    answer_session(rater, sessions.next_session(rater).session)
    return rater


def test_a_bad_export_is_refused_whole_naming_every_problem(run):
    good = HEADER + "s-a,PIDa,APPROVED,2026-11-20 10:00:00,2026-11-20 10:20:00,1200\n"
    platform.load_export(run, good.encode())
    bad = (
        HEADER
        + "s-b,PIDb,APPROVED,2026-11-20 10:00:00,,\n"
        + "s-c,PIDb,RETURNED,,,\n"
        + "s-d,,APPROVED,,,\n"
        + "s-e,PIDe,PAID OUT,,,\n"
        + "s-f,PIDf,APPROVED,yesterday,,\n"
    )
    with pytest.raises(ListeningError) as refused:
        platform.load_export(run, bad.encode())
    message = refused.value.message
    assert "4 problem(s)" in message
    assert "line 3: participant PIDb is listed on line 2 too" in message
    assert "line 4: no participant id" in message
    assert "line 5: unknown status 'PAID OUT'" in message
    assert "line 6: started at yesterday is not a time" in message
    # Nothing of it was stored: the previous export stands.
    assert list(PlatformSubmission.objects.values_list("participant_id", flat=True)) == ["PIDa"]
    with pytest.raises(ListeningError, match="lacks the column\\(s\\) 'Status'"):
        platform.load_export(run, b"Participant id,Started at\nPIDx,\n")


def test_workers_the_platform_does_not_list_as_valid_leave_the_scoring(run):
    kept = _worker(run, "PIDkept", "s-kept")
    returned = _worker(run, "PIDreturned", "s-ret")
    absent = _worker(run, "PIDabsent", "s-abs")
    other = _worker(run, "PIDother", "s-mine")
    before = score(collect_inputs(run), Rules(bootstrap=0))
    # No export loaded: the platform rule takes no one out (the answers, given by the service
    # at once, break other rules).
    assert not any("platform" in e["rules"] for e in before["excluded_sessions"])
    export = (
        HEADER
        + "s-kept,PIDkept,AWAITING REVIEW,2026-11-20T10:00:00Z,2026-11-20T10:20:00Z,1200\n"
        + "s-ret,PIDreturned,RETURNED,2026-11-20T10:00:00Z,,\n"
        + "s-theirs,PIDother,APPROVED,2026-11-20T10:00:00Z,2026-11-20T10:20:00Z,1200\n"
        + "s-x,PIDnever,TIMED-OUT,,,\n"
    )
    loaded = platform.load_export(run, export.encode())
    assert loaded.rows == 4 and loaded.unknown == 3
    assert platform.unreconciled(run) == {
        returned.code: "returned on the crowd platform",
        absent.code: "not in the crowd platform's submissions export",
        other.code: "came with another submission id than the one the crowd platform lists "
        "(s-mine against s-theirs)",
    }
    result = score(collect_inputs(run), Rules(bootstrap=0))
    platform_reasons = {
        e["rater"]: e["rules"]["platform"]
        for e in result["excluded_sessions"]
        if "platform" in e["rules"]
    }
    assert set(platform_reasons) == {returned.code, absent.code, other.code}
    assert platform_reasons[returned.code] == "returned on the crowd platform"
    excluded = next(e for e in result["excluded_sessions"] if e["rater"] == returned.code)
    assert "platform: returned on the crowd platform" in excluded["reasons"]
    # The ratings export names the reason on every row of theirs.
    rows = selectors.rating_rows(run)
    assert {r["platform"] for r in rows if r["rater"] == absent.code} == {
        "not in the crowd platform's submissions export"
    }
    assert {r["platform"] for r in rows if r["rater"] == kept.code} == {""}


def test_the_organizer_loads_the_export_on_the_listening_page(run, organizer_client):
    _worker(run, "PIDgone", "s-gone")
    upload = SimpleUploadedFile("export.csv", (HEADER + "s-1,PIDelse,APPROVED,,,\n").encode())
    response = organizer_client.post(
        f"/organize/{run.slug}/listen/platform/", {"file": upload}, follow=True
    )
    page = response.content.decode()
    assert "Loaded 1 submissions (1 approved). 1 crowd worker of this test leaves" in page
    assert 'id="platform-left"' in page and "not in the crowd platform&#x27;s" in page
    bad = SimpleUploadedFile("export.csv", b"Participant id\nPIDa\n")
    refused = organizer_client.post(f"/organize/{run.slug}/listen/platform/", {"file": bad})
    assert refused.status_code == 400 and "lacks the column(s) &#x27;Status&#x27;" in (
        refused.content.decode()
    )
    assert Client().post(f"/organize/{run.slug}/listen/platform/").status_code in (302, 403)


def test_a_link_from_another_study_is_refused(run):
    ListeningTest.objects.filter(challenge=run).update(crowd_study_id="study-1")
    key = selectors.listening_test(run).crowd_key
    with pytest.raises(ListeningError, match="belongs to another study"):
        enrolment.enrol_crowd(run, key, participant_id="PIDs", study_id="study-2")
    assert not Rater.objects.filter(participant_id="PIDs").exists()
    rater = enrolment.enrol_crowd(run, key, participant_id="PIDs", study_id="study-1")
    assert rater.study_id == "study-1"


def test_a_team_member_through_the_crowd_link_rates_as_the_team(run, django_user_model):
    team = run.teams.first()
    member = django_user_model.objects.create_user("member", password="member-pass-1")
    join(team, member)
    key = selectors.listening_test(run).crowd_key
    rater = enrolment.enrol_crowd(run, key, participant_id="PIDmember", user=member)
    assert rater.team_id == team.pk
    # Through the page, logged in: the same.
    client = Client()
    client.force_login(member)
    client.get(f"/listen/{run.slug}/crowd/{key}/?PROLIFIC_PID=PIDmember2&SESSION_ID=s2")
    assert Rater.objects.get(participant_id="PIDmember2").team_id == team.pk
