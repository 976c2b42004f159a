"""The phases' state machine (stimuli/phases.py): forward only, refusals named, and the only code
that sets a challenge's phase."""

from __future__ import annotations

import ast

import pytest
from django.db import transaction

from stimuli.models import Challenge
from stimuli.phases import TRANSITIONS, PhaseError, advance
from tests import ROOT_DIR

Phase = Challenge.Phase


def locked(challenge: Challenge) -> Challenge:
    return Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)


@pytest.mark.django_db(transaction=True)
def test_the_phases_move_forward_only(challenge):
    with transaction.atomic():
        assert advance(locked(challenge), "start_objective") is True
    challenge.refresh_from_db()
    assert challenge.phase == Phase.OBJECTIVE
    with transaction.atomic():
        assert advance(locked(challenge), "open_listening") is True
        assert advance(locked(challenge), "start_objective") is False  # FAD run again: stays
        assert advance(locked(challenge), "open_listening") is False
    challenge.refresh_from_db()
    assert challenge.phase == Phase.LISTENING
    with transaction.atomic():
        assert advance(locked(challenge), "publish_final") is True
        with pytest.raises(PhaseError, match="Results are published"):
            advance(locked(challenge), "open_listening")
    challenge.refresh_from_db()
    assert challenge.phase == Phase.PUBLISHED


def test_every_transition_moves_forward_to_a_phase_it_does_not_leave_from():
    order = list(Phase.values)
    for name, move in TRANSITIONS.items():
        assert move.target not in move.sources, name
        assert all(order.index(p) < order.index(move.target) for p in move.sources), name
        assert move.effect, name
    reachable = {Phase.SETUP} | {move.target for move in TRANSITIONS.values()}
    assert reachable == set(order)


def test_no_module_sets_a_phase_by_hand():
    """Only stimuli/phases.py writes a challenge's phase: an `update(phase=...)`, an assignment
    to `.phase` or a save naming it anywhere else fails here."""
    offenders = []
    for package in ("stimuli", "raters", "scoring", "foley_platform"):
        for path in (ROOT_DIR / package).rglob("*.py"):
            relative = str(path.relative_to(ROOT_DIR))
            if relative == "stimuli/phases.py" or "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any(isinstance(t, ast.Attribute) and t.attr == "phase" for t in targets):
                        offenders.append(f"{relative}:{node.lineno}")
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    if node.func.attr in ("update", "create", "update_or_create") and any(
                        k.arg == "phase" for k in node.keywords
                    ):
                        offenders.append(f"{relative}:{node.lineno}")
                    if node.func.attr == "save" and "'phase'" in ast.unparse(node):
                        offenders.append(f"{relative}:{node.lineno}")
    assert offenders == []
