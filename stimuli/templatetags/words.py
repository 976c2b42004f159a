"""Filters that write numbers as a person reads them."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def duration(seconds) -> str:
    """Seconds in the largest units that read naturally: "12 h", "1 h 30 min", "45 min",
    "2 min 5 s", "40 s" (whole seconds; "" for nothing)."""
    if seconds is None or seconds == "":
        return ""
    total = round(float(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs and minutes < 10 else f"{minutes} min"
    return f"{secs} s"
