from __future__ import annotations

from django import template
from django.utils.html import format_html

register = template.Library()


def _number(value) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


@register.filter
def cell(pair):
    """A table cell: the value, its interval in brackets when it has one, or why it has none
    (too few raters or sounds for an honest interval, or no spread) instead of a narrow one."""
    value, interval, withheld, _numeric = pair
    if withheld and value is not None:
        return format_html(
            '{} <small class="ci withheld" title="{}">[no interval: {}]</small>',
            _number(value),
            withheld,
            _short_reason(withheld),
        )
    if interval and None not in interval and value is not None:
        return format_html(
            '{} <small class="ci">[{}, {}]</small>',
            _number(value),
            _number(interval[0]),
            _number(interval[1]),
        )
    return _number(value)


@register.filter
def is_number(pair) -> bool:
    """A number, or a cell in a column of numbers (a missing value's dash aligns with them)."""
    value, numeric = pair[0], pair[3]
    return numeric or (isinstance(value, int | float) and not isinstance(value, bool))


@register.simple_tag
def latest_snapshot(challenge):
    """The newest snapshot, interim ones kept for organizers included (an organizer's page)."""
    from scoring.selectors import latest_snapshot as latest

    return latest(challenge, organizer=True)


def _short_reason(withheld: str) -> str:
    """The few words a cell has room for, with the count that decided it (diversity rated by
    two organizers reads "only 2 raters"); the whole reason is its title."""
    count = withheld.split(" ", 1)[0]
    if "sounds: too few" in withheld:
        return f"only {count} sounds"
    if "all agree" in withheld:
        return "no spread"
    if "raters: too few" in withheld:
        return f"only {count} raters"
    return "one rater or sound"
