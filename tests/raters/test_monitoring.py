"""The organizers' monitoring table at 300 simulated raters: one row per rater with a short
verdict per rule and per screening step, the pass rates above, filtered and sorted on the
server, the reasons behind a disclosure, and the screening settings and export."""

from __future__ import annotations

import csv
import io
import re

import pytest

from raters import enrolment, monitoring, preparation, selectors, sessions
from raters.models import Screening, Stimulus
from tests.listening_setup import answer_session, build_listening_challenge
from tests.raters.monitor_setup import add_raters

pytestmark = pytest.mark.django_db


@pytest.fixture
def crowd_run():
    challenge = build_listening_challenge(slug="monitor", categories=2)
    counts = add_raters(challenge, 300)
    return challenge, counts


def test_every_rater_has_one_row_with_a_verdict_per_rule_and_step(crowd_run):
    challenge, counts = crowd_run
    table = monitoring.table(challenge)
    assert table.total == 300 and len(table.rows) == 300
    assert table.steps == ["level", "headphones"]
    assert table.counts["screened_out"] == counts["screened_out"]
    assert table.counts["screening"] == counts["screening"]
    by_status = {s: n for s, n in table.counts.items() if n}
    # Crowd workers are excluded by too fast and straight-lining, invited ones only flagged.
    assert by_status["excluded"] > 0 and by_status["flagged"] > 0 and by_status["ok"] > 100
    rates = {r["step"]: r for r in table.step_rates}
    assert rates["headphones"]["judged"] == 300 - counts["screening"]
    assert (
        rates["headphones"]["passed"]
        == 300 - counts["screening"] - counts["screened_out"] - counts["headphones_failed_once"]
    )
    rules = {r["rule"]: r for r in table.rule_rates}
    assert rules["too_fast"]["judged"] == 300 - counts["screened_out"] - counts["screening"]
    assert rules["too_fast"]["passed"] == rules["too_fast"]["judged"] - counts["too_fast"]
    fast = next(r for r in table.rows if r.rules["too_fast"] in ("exclude", "flag"))
    assert any("too_fast: median 1.0 s" in reason for reason in fast.reasons)


def test_the_table_filters_and_sorts(crowd_run):
    challenge, counts = crowd_run
    out = monitoring.table(challenge, {"status": "screened_out"})
    assert len(out.rows) == counts["screened_out"] and out.total == 300
    assert all(r.steps["headphones"] == "out" for r in out.rows)
    invited = monitoring.table(challenge, {"kind": "invited", "status": "excluded"})
    assert invited.rows == [] or all(r.rater.kind == "invited" for r in invited.rows)
    worst = monitoring.table(challenge, {"sort": "too_fast"}).rows
    assert worst[0].rules["too_fast"] == "exclude"
    last = monitoring.table(challenge, {"sort": "answered", "order": "desc"}).rows
    assert last[0].answered >= last[-1].answered
    ignored = monitoring.table(challenge, {"status": "nonsense", "sort": "nonsense"})
    assert len(ignored.rows) == 300 and ignored.sort == "enrolment"


def test_the_progress_partial_shows_codes_rates_and_reasons(crowd_run, organizer_client):
    challenge, counts = crowd_run
    url = f"/organize/{challenge.slug}/listen/progress/"
    html = organizer_client.get(url).content.decode()
    assert html.count('<tr class="status-') == 300
    assert 'id="pass-rates"' in html and '<span class="code">HP</span>' in html
    assert "<summary>1 reason</summary>" in html
    filtered = organizer_client.get(url, {"status": "screened_out"}).content.decode()
    assert filtered.count('<tr class="status-') == counts["screened_out"]
    assert re.search(r"Showing \d+\.", filtered)
    page = organizer_client.get(f"/organize/{challenge.slug}/listen/").content.decode()
    assert 'hx-include="#rater-filter"' in page and 'id="rater-filter"' in page


def test_screening_is_switched_on_and_off_and_its_attempts_exported(organizer_client):
    challenge = build_listening_challenge(slug="monitor-settings", categories=1)
    base = f"/organize/{challenge.slug}/listen/"
    form = {
        "enabled": "on",
        "who": "crowd",
        "level_check": "on",
        "headphone_check": "on",
        "headphone_trials": "6",
        "headphone_pass": "7",
        "hearing_triplets": "24",
        "hearing_pass_db": "-7",
        "attempts": "2",
        "screen_out_code": "SCREEN1",
        "screen_out_url": "",
    }
    response = organizer_client.post(f"{base}screening/", form)
    assert response.status_code == 400 and "At most the number of trials." in (
        response.content.decode()
    )
    assert not Screening.objects.exists()
    organizer_client.post(f"{base}screening/", {**form, "headphone_pass": "5"})
    saved = Screening.objects.get()
    assert saved.steps() == ["level", "headphones"] and saved.screen_out_code == "SCREEN1"
    add_raters(challenge, 20)
    response = organizer_client.get(f"{base}screening.csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {r["step"] for r in rows} == {"level", "headphones"}
    assert any(r["state"] == "failed" and r["summary"] == "2 of 6 right, pass at 5" for r in rows)
    organizer_client.post(f"{base}screening/", {**form, "enabled": "", "headphone_pass": "5"})
    assert not Screening.objects.exists()


def _answer(rater, value_of) -> None:
    """The rater's next session answered: anchors as expected, each trial `value_of`."""
    answer_session(rater, sessions.next_session(rater).session, value_of=value_of)


def test_a_crowd_worker_lifting_one_system_is_named_in_the_monitoring():
    challenge = build_listening_challenge(
        slug="monitor-favour",
        categories=1,
        systems_per_track=3,
        clips_per_system=3,
        target_ratings=50,
        categories_min=1,
    )
    preparation.set_open(challenge, True)
    systems = sorted(
        set(Stimulus.objects.filter(challenge=challenge).values_list("system_id", flat=True))
    )
    level = {system: 3 + index for index, system in enumerate(systems)}
    favoured = systems[0]
    key = selectors.listening_test(challenge).crowd_key

    def honest(n: int):
        return lambda stimulus: level[stimulus.system_id] + (stimulus.pk * 7 + n) % 3 - 1

    for n in range(8):
        rater = enrolment.invite(challenge)
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
        _answer(rater, honest(n))
    worker = enrolment.enrol_crowd(challenge, key, participant_id="lifter", session_id="s")
    enrolment.record_consent(worker)
    enrolment.record_instructions(worker)
    _answer(worker, lambda s: 10 if s.system_id == favoured else honest(3)(s))
    table = monitoring.table(challenge)
    row = next(r for r in table.rows if r.rater.pk == worker.pk)
    assert row.rules["favouritism"] == "exclude" and row.status == "excluded"
    assert any(reason.startswith("favouritism: lifts system") for reason in row.reasons)
    others = [r for r in table.rows if r.rater.pk != worker.pk]
    assert {r.rules["favouritism"] for r in others} == {"ok"}
