"""A page's part that htmx swaps in, or the same part inside the site's layout when someone opens
its address as a page (a bookmark, a link, a form posted without htmx)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def render_panel(
    request: HttpRequest,
    template: str,
    context: dict,
    *,
    title: str,
    panel_id: str = "",
    status: int = 200,
) -> HttpResponse:
    """`template` alone for htmx; otherwise inside base.html under `title`, wrapped in an element
    with `panel_id` so that the part's own htmx targets still find it."""
    if getattr(request, "htmx", False):
        return render(request, template, context, status=status)
    page = {**context, "panel_template": template, "panel_title": title, "panel_id": panel_id}
    return render(request, "panel_page.html", page, status=status)
