"""The rater-quality rules: one engine (raters.rules) assessing every session alike in scoring,
assignment, the monitoring page and the ratings export."""

from __future__ import annotations

import csv
import io

import pytest

from raters import enrolment, preparation, selectors, sessions
from raters.models import ListeningTest, Rating
from raters.rules import DCASE_MISRATING, RaterRules, RuleError, assess
from scoring.compute import score
from scoring.inputs import Inputs
from scoring.models import ScoringSettings
from scoring.rules import Rules
from scoring.services import collect_inputs
from tests.listening_setup import build_listening_challenge

RIGHT = {"anchor_hq_goodfit": (9, 9), "anchor_hq_poorfit": (9, 1), "anchor_lq_poorfit": (1, 1)}
WRONG = {"anchor_hq_goodfit": (1, 1), "anchor_hq_poorfit": (9, 9), "anchor_lq_poorfit": (9, 9)}


def _rows(session="R1-1", *, answers=None, misrated=0, heard=1.0, answer_s=8.0, gold=()):
    """A session of 12 checks (4 per type, the first `misrated` contradicting their type) and 24
    trials with varied answers."""
    rows = []
    for i, role in enumerate(r for r in RIGHT for _ in range(4)):
        q, f = WRONG[role] if i < misrated else RIGHT[role]
        rows.append({"role": role, "quality": q, "fit": f})
    for i in range(24):
        q, f = answers if answers else (i % 11, (3 * i) % 11)
        rows.append({"role": "trial", "quality": q, "fit": f})
    for expected, given in gold:
        rows.append(
            {"role": "gold", "quality": given, "fit": given, "expected_quality": expected,
             "expected_fit": expected}
        )  # fmt: skip
    for row in rows:
        if answers and row["role"] != "gold":
            row["quality"], row["fit"] = answers
        row.update(session=session, rater=session.split("-")[0], category="dog")
        row.update(heard_fraction=heard, answer_s=answer_s)
    return rows


# DCASE 2023 Task 7's own anchor rule (only an answer at the opposite extreme misrates), under
# which every other rule can be seen alone on a session answered 5 everywhere.
DCASE = RaterRules({"anchors": {"misrating": DCASE_MISRATING}})


def _crowd(rows):
    for row in rows:
        row["rater_kind"] = "crowd"
    return rows


def _verdict(rows, rules=None):
    [verdict] = assess(rows, rules or RaterRules()).values()
    return verdict


def test_invited_raters_are_excluded_by_the_anchor_rule_only():
    assert not _verdict(_rows(misrated=4)).excluded
    verdict = _verdict(_rows(misrated=5))
    assert verdict.excluded and verdict.misrated == 5 and verdict.anchors == 12
    assert str(verdict.flags[0]) == "excluded by anchors: 5 of 12 anchors misrated (limit 5)"
    # Every other rule only flags an invited rater by default.
    for rows, rule, rules in (
        (_rows(answers=(5, 5)), "straight_lining", DCASE),
        (_rows(answer_s=1.0), "too_fast", None),
        (_rows(heard=0.3), "not_listened", None),
        (_rows(gold=[(2, 8)]), "gold", None),
    ):
        verdict = _verdict(rows, rules)
        assert [(f.rule, f.action) for f in verdict.flags] == [(rule, "flag")], rule
        assert not verdict.excluded


def test_crowd_workers_are_excluded_by_straight_lining_and_speed_too():
    for rows, rule, rules in (
        (_rows(answers=(5, 5)), "straight_lining", DCASE),
        (_rows(answer_s=1.0), "too_fast", None),
    ):
        invited = _verdict(rows, rules)
        crowd = _verdict(_crowd(rows), rules)
        assert [(f.rule, f.action) for f in invited.flags] == [(rule, "flag")]
        assert [(f.rule, f.action) for f in crowd.flags] == [(rule, "exclude")]
        assert crowd.excluded and not invited.excluded
    # Not listening only flags, for the crowd too (the server refuses unheard answers anyway).
    assert not _verdict(_crowd(_rows(heard=0.3))).excluded


def test_five_out_of_five_everywhere_is_excluded_by_default():
    # A mid-scale answer on an anchor made for an extreme is a misrating: all 12 are.
    verdict = _verdict(_rows(answers=(5, 5)))
    assert verdict.misrated == 12 and verdict.excluded
    assert verdict.summary() == (
        "excluded by anchors: 12 of 12 anchors misrated (limit 5); "
        "flagged by straight_lining: the same answer (5, 5) on 36 of 36"
    )
    # Under DCASE's own anchor rule only straight-lining catches it.
    verdict = _verdict(_rows(answers=(5, 5)), DCASE)
    assert verdict.misrated == 0
    assert verdict.summary() == "flagged by straight_lining: the same answer (5, 5) on 36 of 36"
    # Little variance without one repeated answer is caught too.
    rows = _rows()
    for n, row in enumerate(rows):
        row["quality"], row["fit"] = 5 + n % 2, 5
    strict = RaterRules(
        {
            "straight_lining": {"action": "exclude"},
            "anchors": {"misrating": DCASE_MISRATING},
        }
    )
    verdict = _verdict(rows, strict)
    assert verdict.excluded and "variance" in verdict.flags[0].reason


def test_each_rule_can_exclude_flag_or_be_off():
    rows = _rows(answer_s=1.0, heard=0.5)
    rules = RaterRules(
        {
            "too_fast": {"action": "exclude", "min_median_answer_s": 2},
            "not_listened": {"action": "off"},
        }
    )
    verdict = _verdict(rows, rules)
    assert [(f.rule, f.action) for f in verdict.flags] == [("too_fast", "exclude")]
    assert "median 1.0 s to answer (limit 2 s)" in verdict.flags[0].reason
    assert not _verdict(_rows(answer_s=2.5), rules).flags
    # An unfinished session is assessed only by what cannot change any more.
    [open_verdict] = assess(rows[:3], rules, unfinished=["R1-1"]).values()
    assert not open_verdict.flags
    for bad in (
        {"speed": {}},
        {"too_fast": {"action": "maybe"}},
        {"too_fast": {"min_median_answer_s": -1}},
        {"too_fast": {"median": 3}},
        {"anchors": {"low": 8}},
    ):
        with pytest.raises(RuleError):
            RaterRules(bad)


def test_scoring_excludes_and_flags_by_the_same_rules():
    from tests.scoring.test_compute import teams

    rows = []
    for n, kind in enumerate(("good", "straight", "fast", "deaf", "misrating")):
        session = _rows(
            f"R{n}-{n}",
            answers=(5, 5) if kind == "straight" else None,
            answer_s=1.0 if kind == "fast" else 8.0,
            heard=0.2 if kind == "deaf" else 1.0,
            misrated=5 if kind == "misrating" else 0,
        )
        for row in session:
            row.update(rater_team="", system="S1" if row["role"] == "trial" else "", track="A")
            row["stimulus"] = "S1/dog/1" if row["role"] == "trial" else "anchor/1"
        rows += session
    inputs = Inputs(rows, [], [], teams("S1"))
    dcase = DCASE_MISRATING
    result = score(inputs, Rules(bootstrap=0, misrating=dcase))
    assert [e["rater"] for e in result["excluded_sessions"]] == ["R4"]
    assert result["excluded_sessions"][0]["rules"] == {
        "anchors": "5 of 12 anchors misrated (limit 5)"
    }
    flagged = {e["rater"]: set(e["flags"]) for e in result["flagged_sessions"]}
    assert flagged == {"R1": {"straight_lining"}, "R2": {"too_fast"}, "R3": {"not_listened"}}
    strict = Rules(
        bootstrap=0,
        misrating=dcase,
        rater_rules={
            r: {"action": "exclude"} for r in ("straight_lining", "too_fast", "not_listened")
        },
    )
    result = score(inputs, strict)
    assert [e["rater"] for e in result["excluded_sessions"]] == ["R1", "R2", "R3", "R4"]
    reasons = {e["rater"]: e["reasons"] for e in result["excluded_sessions"]}
    assert reasons["R2"] == ["too_fast: median 1.0 s to answer (limit 3 s)"]
    assert len(reasons["R4"]) == 5 and reasons["R4"][0].startswith("anchor_hq_goodfit rated")
    assert result["counts"]["trial_ratings_used"] == 24
    # The settings hold each rule as applied: the override, and the defaults beside it.
    assert result["settings"]["rater_rules"]["too_fast"] == {
        "action": "exclude",
        "crowd_action": "exclude",
        "min_median_answer_s": 3.0,
        "min_answers": 4,
    }


@pytest.mark.django_db
def test_flags_reach_scoring_the_export_monitoring_and_assignment(organizer_client):
    challenge = build_listening_challenge(slug="quality", categories=3, target_ratings=2)
    preparation.set_open(challenge, True)
    # DCASE's anchor rule, so that a session answered 5 everywhere is caught by straight-lining
    # alone.
    ListeningTest.objects.filter(challenge=challenge).update(misrating_rules=DCASE_MISRATING)
    answered = {}
    for kind in ("straight", "fast", "deaf", "misrating"):
        rater = enrolment.invite(challenge, label=kind)
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
        session = sessions.next_session(rater).session
        sessions.complete_familiarization(session, require_heard=False)
        wrong = 0
        while (trial := sessions.next_trial(session)) is not None:
            q, f = RIGHT.get(trial.role, (trial.position % 11, 7))
            if kind == "straight":
                q, f = 5, 5
            elif kind == "misrating" and trial.role != "trial" and wrong < 5:
                q, f = WRONG[trial.role]
                wrong += 1
            sessions.save_rating(rater, trial.token, quality=q, fit=f, key=f"q-{trial.token}")
        Rating.objects.filter(trial__session=session).update(
            plays=1,
            heard_fraction=0.2 if kind == "deaf" else 1.0,
            answer_s=1.0 if kind == "fast" else 9.0,
        )
        answered[kind] = session

    settings, _ = ScoringSettings.objects.get_or_create(challenge=challenge)
    result = score(collect_inputs(challenge), settings.rules())
    assert [e["session"] for e in result["excluded_sessions"]] == [answered["misrating"].code]
    flagged = {e["session"]: set(e["flags"]) for e in result["flagged_sessions"]}
    assert flagged == {
        answered["straight"].code: {"straight_lining"},
        answered["fast"].code: {"too_fast"},
        answered["deaf"].code: {"not_listened"},
    }

    def export() -> dict[str, str]:
        text = organizer_client.get(f"/organize/{challenge.slug}/listen/ratings.csv")
        rows = list(csv.DictReader(io.StringIO(text.content.decode())))
        assert len(rows) == 4 * 16
        by_session: dict[str, set] = {}
        for row in rows:
            by_session.setdefault(row["session"], set()).add(row["flags"])
        assert all(len(flags) == 1 for flags in by_session.values())  # on every row
        return {session: flags.pop() for session, flags in by_session.items()}

    flags = export()
    assert flags[answered["straight"].code].startswith("flagged by straight_lining: the same")
    assert flags[answered["fast"].code] == "flagged by too_fast: median 1.0 s to answer (limit 3 s)"
    assert (
        flags[answered["deaf"].code] == "flagged by not_listened: 16 of 16 sounds heard below 90%"
    )
    assert flags[answered["misrating"].code].startswith("excluded by anchors: 5 of 12")

    page = organizer_client.get(f"/organize/{challenge.slug}/listen/progress/").content.decode()
    assert "flagged by too_fast: median 1.0 s to answer" in page
    assert "excluded by anchors: 5 of 12 anchors misrated" in page
    assert "flagged by not_listened" in page and "flagged by straight_lining" in page
    api = organizer_client.get(f"/api/listen/challenges/{challenge.slug}/progress/").json()
    reasons = {flag["session"]: flag["reasons"] for row in api["raters"] for flag in row["flags"]}
    assert reasons[answered["fast"].code] == [
        "flagged by too_fast: median 1.0 s to answer (limit 3 s)"
    ]
    assert sum(row["sessions_flagged"] for row in api["raters"]) == 3

    # Assignment: the excluded session leaves its place; flagged ones keep theirs.
    category = answered["misrating"].category_id
    before = sessions.category_need(challenge)
    # Made to exclude, the other three leave their places too, in every view alike.
    ListeningTest.objects.filter(challenge=challenge).update(
        rater_rules={
            r: {"action": "exclude"} for r in ("straight_lining", "too_fast", "not_listened")
        },
    )
    after = sessions.category_need(challenge)
    assert sum(after.values()) == sum(before.values()) + 3
    assert after[category] >= before[category]
    assert set(selectors.excluded_sessions(challenge)) == {s.pk for s in answered.values()}
    assert all(flag.startswith("excluded by") for flag in export().values())
    page = organizer_client.get(f"/organize/{challenge.slug}/listen/progress/").content.decode()
    assert "excluded by too_fast" in page and "flagged by" not in page
    result = score(
        collect_inputs(challenge), ScoringSettings.objects.get(challenge=challenge).rules()
    )
    assert len(result["excluded_sessions"]) == 4
