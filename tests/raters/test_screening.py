"""The screening stage through the rater's pages and the services: the checks before the first
category, nothing in a page that tells the answer, the attempts per participant id held by the
database, replayed answers changing nothing, the rule's action (exclude screens out, flag lets
the rater go on with every session flagged), the hearing check's staircase, and the export."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import IntegrityError, connection, transaction
from django.test import Client

from raters import enrolment, preparation, rules, screening, selectors
from raters.models import Rater, Screening, ScreeningAttempt, ScreeningTrial
from tests.listening_setup import answer_session, build_listening_challenge, get_sound

pytestmark = pytest.mark.django_db


def _challenge(slug: str = "screen", **options):
    challenge = build_listening_challenge(
        slug=slug, categories=1, familiarization_clips=2, listened_fraction=0.0
    )
    preparation.set_open(challenge, True)
    test = selectors.listening_test(challenge)
    values = {"level_check": False, "screen_out_url": "", **options}
    Screening.objects.create(test=test, **values)
    return challenge


def _crowd(challenge, pid: str) -> tuple[Client, Rater]:
    client = Client()
    key = selectors.listening_test(challenge).crowd_key
    url = f"/listen/{challenge.slug}/crowd/{key}/?PROLIFIC_PID={pid}&SESSION_ID=s-{pid}"
    assert client.get(url).status_code == 302
    slug = challenge.slug
    assert client.post(f"/listen/{slug}/consent/", {"agree": "yes"}).status_code == 302
    response = client.post(f"/listen/{slug}/instructions/")
    assert response.url == f"/listen/{slug}/checks/"
    return client, Rater.objects.get(participant_id=pid)


def _answer_page(client: Client, slug: str, choose) -> str:
    """Open the check's page, fetch its sound as a browser does, and answer it by `choose`
    (which gets the trial the page shows)."""
    page = client.get(f"/listen/{slug}/checks/").content.decode()
    token = re.search(r'name="token" value="([^"]+)"', page).group(1)
    for url in re.findall(r'src="(/listen/[^"]+/audio/[^"]+/)"', page):
        assert get_sound(client, url).status_code == 200
    trial = ScreeningTrial.objects.get(token=token)
    response = client.post(
        f"/listen/{slug}/checks/answer/", {"token": token, "answer": choose(trial)}
    )
    assert response.status_code == 303, response.content
    return page


def _blind(page: str) -> str:
    """A page with what legitimately differs between trials (token, number, CSRF) masked."""
    page = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "CSRF", page)
    page = re.sub(r'"X-CSRFToken": "[^"]+"', "CSRF", page)
    page = re.sub(r"/(audio)/[^/]+/|value=\"[A-Za-z0-9_-]{22}\"|data-token=\"[^\"]+\"", "T", page)
    return re.sub(r"[Ss]ound \d", "N", page)


def _wrong(trial: ScreeningTrial) -> str:
    return "1" if trial.answer_key != "1" else "2"


def test_a_crowd_worker_passes_the_headphone_check_and_reaches_the_examples():
    challenge = _challenge()
    client, rater = _crowd(challenge, "PIDpass")
    slug = challenge.slug
    assert client.get(f"/listen/{slug}/").url == f"/listen/{slug}/checks/"
    assert not rater.sessions.exists()  # no category before the checks
    pages = []
    for n in range(6):
        answer = (lambda t: t.answer_key) if n else _wrong  # one wrong: 5 of 6 passes
        pages.append(_answer_page(client, slug, answer))
    # Nothing in a page tells the answer: pages differ only by their token and number.
    blinded = {_blind(p) for p in pages}
    assert len(blinded) == 1
    attempt = rater.screening_attempts.get()
    assert attempt.state == "passed" and attempt.score == 5
    assert attempt.summary == "5 of 6 right, pass at 5"
    response = client.get(f"/listen/{slug}/checks/")
    assert response.url == f"/listen/{slug}/"
    assert "Examples of" in client.get(f"/listen/{slug}/").content.decode()
    assert rater.sessions.count() == 1


def test_a_worker_who_fails_is_screened_out_and_cannot_retry_past_the_limit():
    challenge = _challenge(screen_out_url="https://app.prolific.com/submissions/complete")
    client, rater = _crowd(challenge, "PIDfail")
    slug = challenge.slug
    for _ in range(6):
        _answer_page(client, slug, _wrong)
    page = client.get(f"/listen/{slug}/checks/").content.decode()
    assert "0 of 6 right" in page and "1 attempt left" in page
    assert client.post(f"/listen/{slug}/checks/retry/").status_code == 303
    for _ in range(6):
        _answer_page(client, slug, _wrong)
    settings = Screening.objects.get(test__challenge=challenge)
    page = client.get(f"/listen/{slug}/checks/").content.decode()
    assert 'id="screened-out"' in page and settings.screen_out_code in page
    assert f"cc={settings.screen_out_code}" in page
    assert enrolment.completion_code(selectors.listening_test(challenge)) not in page
    # A third go, by the form, by the service or straight into the table: none is made.
    assert client.post(f"/listen/{slug}/checks/retry/").status_code == 303
    assert screening.begin(Rater.objects.get(pk=rater.pk), retry=True).screened_out is not None
    with pytest.raises(IntegrityError), transaction.atomic():
        ScreeningAttempt.objects.create(rater=rater, step="headphones", number=3, limit=2, seed=1)
    with pytest.raises(IntegrityError), transaction.atomic():  # a number taken again
        ScreeningAttempt.objects.create(rater=rater, step="headphones", number=2, limit=2, seed=1)
    assert rater.screening_attempts.count() == 2
    # Nothing past the checks: no category by the next-category form, none by the link again.
    assert client.post(f"/listen/{slug}/next/").status_code == 403
    assert not rater.sessions.exists()
    again = Client()
    key = selectors.listening_test(challenge).crowd_key
    url = f"/listen/{slug}/crowd/{key}/?PROLIFIC_PID=PIDfail&SESSION_ID=other"
    assert again.get(url).status_code == 409
    back = Client()
    url = f"/listen/{slug}/crowd/{key}/?PROLIFIC_PID=PIDfail&SESSION_ID=s-PIDfail"
    assert back.get(url).status_code == 302
    assert 'id="screened-out"' in back.get(f"/listen/{slug}/checks/").content.decode()
    assert not enrolment.completion_earned(rater)
    # The crowd decisions say why there is nothing to approve.
    [decision] = selectors.crowd_decisions(challenge)
    assert decision["action"] == ""
    assert decision["message"] == "Screening not passed: headphones check 0 of 6 right, pass at 5"


def test_answers_are_stored_once_and_need_the_sound_heard():
    challenge = _challenge()
    client, _rater = _crowd(challenge, "PIDreplay")
    slug = challenge.slug
    page = client.get(f"/listen/{slug}/checks/").content.decode()
    token = re.search(r'name="token" value="([^"]+)"', page).group(1)
    post = {"token": token, "answer": "1"}
    # Not yet delivered: refused, nothing stored.
    assert client.post(f"/listen/{slug}/checks/answer/", post).status_code == 409
    assert not ScreeningTrial.objects.filter(answered_at__isnull=False).exists()
    get_sound(client, f"/listen/{slug}/audio/{token}/")
    assert client.post(f"/listen/{slug}/checks/answer/", post).status_code == 303
    assert client.post(f"/listen/{slug}/checks/answer/", post).status_code == 303  # replayed
    assert client.post(f"/listen/{slug}/checks/answer/", {**post, "answer": "2"}).status_code == 409
    assert client.post(f"/listen/{slug}/checks/answer/", {**post, "answer": "9"}).status_code in (
        400,
        409,
    )
    trial = ScreeningTrial.objects.get(token=token)
    assert trial.answer == "1" and trial.correct == (trial.answer_key == "1")
    # Another rater's token is no answer of this one's.
    other, _ = _crowd(challenge, "PIDother")
    response = other.post(f"/listen/{slug}/checks/answer/", {"token": token, "answer": "1"})
    assert response.status_code == 404


def test_invited_raters_are_not_screened_unless_the_test_says_everyone():
    challenge = _challenge()
    rater = enrolment.invite(challenge)
    assert not screening.pending(rater)
    Screening.objects.filter(test__challenge=challenge).update(who="everyone")
    assert screening.pending(rater)


def test_two_tabs_racing_open_one_attempt():
    challenge = _challenge("screen-race")
    _, rater = _crowd(challenge, "PIDrace")
    ScreeningAttempt.objects.filter(rater=rater).delete()
    ScreeningTrial.objects.filter(attempt__rater=rater).delete()
    barrier = threading.Barrier(2)
    errors = []

    def go():
        try:
            barrier.wait()
            screening.begin(Rater.objects.get(pk=rater.pk))
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert rater.screening_attempts.count() == 1
    assert ScreeningTrial.objects.filter(attempt__rater=rater).count() == 6


test_two_tabs_racing_open_one_attempt = pytest.mark.django_db(transaction=True)(
    test_two_tabs_racing_open_one_attempt
)


def test_a_flagging_rule_lets_the_rater_go_on_and_flags_every_session():
    challenge = _challenge("screen-flag")
    test = selectors.listening_test(challenge)
    test.rater_rules = {"headphones": {"action": "flag"}}
    test.save()
    flagging = test.rules()
    client, rater = _crowd(challenge, "PIDflag")
    slug = challenge.slug
    for _ in range(6):
        _answer_page(client, slug, _wrong)
    assert client.get(f"/listen/{slug}/checks/").url == f"/listen/{slug}/"
    session = rater.sessions.get()
    answer_session(rater, session)
    verdict = selectors.session_verdicts(challenge, rules=flagging)[session.pk]
    assert [f.rule for f in verdict.flags if f.rule == "headphones"] == ["headphones"]
    assert "headphones check failed: 0 of 6 right" in verdict.summary()
    # The same failure under "exclude" excludes the session; under "off" it is not named.
    excluding = rules.RaterRules({"headphones": {"action": "exclude"}})
    assert selectors.session_verdicts(challenge, rules=excluding)[session.pk].excluded
    off = rules.RaterRules({"headphones": {"action": "off"}})
    assert (
        "headphones" not in selectors.session_verdicts(challenge, rules=off)[session.pk].summary()
    )
    rows = screening.export_rows(challenge)
    assert [(r["participant_id"], r["step"], r["state"], r["right"]) for r in rows] == [
        ("PIDflag", "headphones", "failed", 0)
    ]


def test_bad_screening_rules_are_refused():
    with pytest.raises(rules.RuleError):
        rules.RaterRules({"hearing": {"action": "maybe"}})


def test_the_hearing_check_follows_the_staircase(settings):
    challenge = _challenge(
        "screen-hear", headphone_check=False, hearing_check=True, hearing_triplets=8
    )
    client, rater = _crowd(challenge, "PIDhear")
    slug = challenge.slug
    for _ in range(8):
        _answer_page(client, slug, lambda t: " ".join(t.answer_key))
    attempt = rater.screening_attempts.get()
    snrs = [t.snr_db for t in attempt.trials.order_by("position")]
    assert snrs == [0.0, -2.0, -4.0, -6.0, -8.0, -10.0, -12.0, -14.0]
    assert attempt.state == "passed"
    assert attempt.score == pytest.approx(-12.0)  # the mean of -8 .. -14 and the virtual -16
    assert len({t.answer_key for t in attempt.trials.all()}) > 1
    assert client.get(f"/listen/{slug}/checks/").url == f"/listen/{slug}/"


def test_the_level_page_asks_for_a_confirmation():
    challenge = _challenge("screen-level", level_check=True, headphone_check=False)
    client, rater = _crowd(challenge, "PIDlevel")
    slug = challenge.slug
    page = client.get(f"/listen/{slug}/checks/").content.decode()
    assert "comfortable" in page
    token = re.search(r'name="token" value="([^"]+)"', page).group(1)
    get_sound(client, f"/listen/{slug}/audio/{token}/")
    response = client.post(f"/listen/{slug}/checks/answer/", {"token": token, "answer": ""})
    assert response.status_code == 400
    _answer_page(client, slug, lambda t: "set")
    assert rater.screening_attempts.get().state == "passed"
    assert client.get(f"/listen/{slug}/checks/").url == f"/listen/{slug}/"


def test_fewer_attempts_set_after_a_failure_hold_at_once():
    challenge = _challenge("screen-fewer")
    client, rater = _crowd(challenge, "PIDfewer")
    slug = challenge.slug
    for _ in range(6):
        _answer_page(client, slug, _wrong)
    assert "1 attempt left" in client.get(f"/listen/{slug}/checks/").content.decode()
    Screening.objects.filter(test__challenge=challenge).update(attempts=1)
    assert 'id="screened-out"' in client.get(f"/listen/{slug}/checks/").content.decode()
    client.post(f"/listen/{slug}/checks/retry/")
    assert rater.screening_attempts.count() == 1
