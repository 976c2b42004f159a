from __future__ import annotations

from django import template

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
def cell(pair) -> str:
    """A table cell: the value, and its interval in brackets when it has one."""
    value, interval = pair
    text = _number(value)
    if interval and None not in interval and value is not None:
        text += f" [{_number(interval[0])}, {_number(interval[1])}]"
    return text
