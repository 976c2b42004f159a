"""The challenge page's definition section: the file as the challenge now reads, and the form
for a changed one (its owner and organizers only)."""

from __future__ import annotations

from django import template

from ..definition import export, sha256
from ..forms import DefinitionForm
from ..permissions import may_write

register = template.Library()

# What a check or an application of a file left for the section to show (stimuli/
# definition_views.py): its changes, or its problems.
RESULT = ("definition_problems", "checked", "checked_name", "diff_lines", "apply_form")


@register.inclusion_tag("stimuli/definition_section.html", takes_context=True)
def definition_section(context, challenge) -> dict:
    request = context["request"]
    text = export(challenge)
    return {
        "challenge": challenge,
        "request": request,
        "csrf_token": context.get("csrf_token"),
        "definition_text": text,
        "definition_sha256": sha256(text),
        "may_write": may_write(request.user, challenge),
        "definition_form": context.get("definition_form") or DefinitionForm(prefix="definition"),
        **{name: context[name] for name in RESULT if name in context},
    }
