"""The contributor's checklist "a new rater rule": a rule declared in the registry
(`raters.rules.register`) reaches the engine, the scoring, the monitoring table (its column,
pass rate, sort and key), the organizer's page (the rules in force, the sort form) with no other
file changed; and the manual's table of the rules (docs/scoring.md) is the registry's, so a rule
missing from it fails here with the row to add."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from raters import monitoring, rules
from raters.models import CategorySession, Rating
from raters.rules import SESSION, RaterRules, Rule, RuleError, Session, assess
from scoring.compute import score
from scoring.inputs import Inputs
from scoring.rules import Rules
from tests import ROOT_DIR
from tests.listening_setup import add_closed_sessions, build_listening_challenge
from tests.raters.test_rules import _rows

MANUAL = ROOT_DIR / "docs" / "scoring.md"
NONE = "\N{EN DASH}"  # an empty cell
SCOPE_WORDS = {
    rules.SESSION: "each session",
    rules.SCREENING: "each rater's screening",
    rules.PANEL: "the whole panel",
}


def _value(value) -> str:
    return f"{value:g}" if isinstance(value, float | int) and not isinstance(value, bool) else ""


def manual_table() -> str:
    """The manual's table of the rater-quality rules, as the registry declares them."""
    lines = [
        "| Rule | Column | Judges | Invited | Crowd | Broken by | Parameters (default: meaning) |",
        "|---|---|---|---|---|---|---|",
    ]
    for rule in rules.registered():
        action = rule.defaults["action"]
        parameters = "; ".join(
            f"`{name}` {_value(default)}".rstrip() + f": {rule.words[name]}"
            for name, default in rule.parameters().items()
        )
        lines.append(
            f"| `{rule.code}` | {rule.short or NONE} | {SCOPE_WORDS[rule.scope]} | {action} | "
            f"{rule.defaults.get('crowd_action', action)} | {rule.summary} | {parameters or NONE} |"
        )
    return "\n".join(lines) + "\n"


def test_the_manuals_table_of_the_rules_is_the_registrys():
    assert manual_table() in MANUAL.read_text(), (
        "docs/scoring.md's table of the rater-quality rules must read, as the registry "
        "(raters/rules.py) declares them:\n\n" + manual_table()
    )


# --- A toy rule, declared in the test alone ---------------------------------------------------


def _centred(session: Session, rule: Mapping) -> str | None:
    """More than `max_share` of the trials answered at the centre of the quality scale."""
    quality = [float(r["quality"]) for r in session.answers if r["role"] == "trial"]
    centred = sum(q == 5 for q in quality)
    if quality and centred / len(quality) > rule["max_share"]:
        return f"{centred} of {len(quality)} trials at the centre of the quality scale"
    return None


CENTRED = Rule(
    code="centred",
    short="CE",
    label="centred",
    scope=SESSION,
    summary="More than `max_share` of the trials answered at the centre of the quality scale.",
    defaults={"action": "flag", "crowd_action": "exclude", "max_share": 0.5},
    words={"max_share": "share of the trials that may sit at the centre"},
    assess=_centred,
)


@pytest.fixture
def centred_rule():
    rule = rules.register(CENTRED)
    yield rule
    rules.unregister(rule.code)


def _session(session: str, *, centred: bool) -> list[dict]:
    rows = _rows(session)
    for row in rows:
        if centred and row["role"] == "trial":
            row["quality"] = 5
        row.update(rater_team="", system="S1" if row["role"] == "trial" else "", track="A")
        row["stimulus"] = "S1/dog/1" if row["role"] == "trial" else "anchor/1"
    return rows


def test_a_registered_rule_reaches_the_engine_and_the_scoring(centred_rule):
    from tests.scoring.test_compute import teams

    rows = _session("R1-1", centred=True) + _session("R2-2", centred=False)
    verdicts = assess(rows, RaterRules())
    assert [(f.rule, f.action, f.reason) for f in verdicts["R1", "dog", "R1-1"].flags] == [
        ("centred", "flag", "24 of 24 trials at the centre of the quality scale")
    ]
    assert not verdicts["R2", "dog", "R2-2"].flags
    # Set like any other rule: its action, the crowd's, its parameters, checked.
    crowd = assess([{**row, "rater_kind": "crowd"} for row in rows], RaterRules())
    assert crowd["R1", "dog", "R1-1"].excluded
    loose = RaterRules({"centred": {"max_share": 1}})
    assert not assess(rows, loose)["R1", "dog", "R1-1"].flags
    for bad in ({"centred": {"action": "maybe"}}, {"centred": {"share": 1}}):
        with pytest.raises(RuleError):
            RaterRules(bad)
    # The scoring excludes by it, and its settings hold it as applied.
    result = score(
        Inputs(rows, [], [], teams("S1")),
        Rules(bootstrap=0, rater_rules={"centred": {"action": "exclude"}}),
    )
    assert result["excluded_sessions"][0]["rater"] == "R1"
    assert result["excluded_sessions"][0]["rules"] == {
        "centred": "24 of 24 trials at the centre of the quality scale"
    }
    assert len(result["excluded_sessions"]) == 1
    assert result["settings"]["rater_rules"]["centred"]["action"] == "exclude"
    # The manual's table now lacks its row: the check above fails until docs/scoring.md has it.
    assert manual_table() not in MANUAL.read_text()


@pytest.mark.django_db
def test_a_registered_rule_reaches_monitoring_and_the_organizers_page(
    centred_rule, organizer_client
):
    challenge = build_listening_challenge(slug="toy-rule", categories=1, anchors_per_session=0)
    add_closed_sessions(challenge, 3)  # every trial answered 5 and 5
    away = CategorySession.objects.filter(rater__challenge=challenge).order_by("pk").first()
    Rating.objects.filter(trial__session=away).update(quality=8)

    table = monitoring.table(challenge)
    verdicts = {row.rater.pk: row.rules["centred"] for row in table.rows}
    assert verdicts.pop(away.rater_id) == "ok"
    assert list(verdicts.values()) == ["flag", "flag"]
    flagged = next(row for row in table.rows if row.rater.pk != away.rater_id)
    assert "cat0: flagged by centred: 3 of 3 trials at the centre of the quality scale" in (
        flagged.reasons
    )
    assert flagged.status == "flagged"
    [rate] = [r for r in table.rule_rates if r["rule"] == "centred"]
    assert (rate["code"], rate["passed"], rate["judged"]) == ("CE", 1, 3)
    worst = monitoring.table(challenge, {"sort": "centred"})
    assert worst.sort == "centred" and worst.rows[0].rules["centred"] == "flag"
    assert ("CE", "centred") in monitoring.legend()

    page = organizer_client.get(f"/organize/{challenge.slug}/listen/").content.decode()
    # The rules in force, the sort form's option, the table's column.
    assert "<td>centred</td><td>flag</td><td>exclude</td><td>max share 0.5</td>" in page
    assert '<option value="centred">CE centred</option>' in page
    assert '<th class="code" title="centred">CE</th>' in page
    assert 'title="centred: flagged"' in page
