"""What a production start (DEBUG off) refuses: the settings that would make an internet-facing
site unsafe, each named, all at once.

- SECRET_KEY: empty, or the placeholder of `.env.example` (anyone could sign sessions, the
  raters' cookies and invitation links with it).
- ALLOWED_HOSTS: empty (Django would answer no host at all; the usual "fix" is `*`).
- A known demo password: the demo's organizer account still logs in with the password the demo
  prints (it is on every copy of the code).

Settings are checked when the settings module loads (every process); the demo password, which
needs the database, when the web process starts (wsgi.py) and in Django's checks (runserver).
"""

from __future__ import annotations

from pathlib import Path

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

EXAMPLE_FILE = Path(__file__).resolve().parent.parent / ".env.example"


def example_secret_keys() -> set[str]:
    """The placeholders a copied `.env.example` would carry."""
    keys = {"change-me-to-a-long-random-string", "change-me"}
    if EXAMPLE_FILE.exists():
        for line in EXAMPLE_FILE.read_text().splitlines():
            if line.startswith("SECRET_KEY="):
                keys.add(line.partition("=")[2].strip())
    return keys


def unsafe_settings(*, debug: bool, secret_key: str, allowed_hosts: list[str]) -> list[str]:
    """One line per unsafe setting, naming it; none with DEBUG on."""
    if debug:
        return []
    problems = []
    if secret_key in example_secret_keys():
        problems.append(
            "SECRET_KEY is the example value from .env.example: set a long random one "
            "(python -c 'import secrets; print(secrets.token_urlsafe(50))')"
        )
    if not [host for host in allowed_hosts if host.strip()]:
        problems.append("ALLOWED_HOSTS is empty: list the site's host names")
    return problems


def demo_passwords_in_use() -> list[str]:
    """Accounts that still log in with the demo's published password."""
    from django.contrib.auth import get_user_model
    from django.db import DatabaseError
    from django.db.models import Q

    from stimuli.demo import DEMO_PASSWORD, DEMO_USER

    try:
        # The demo's account, and any staff account someone gave the same password.
        users = list(
            get_user_model().objects.filter(
                Q(username=DEMO_USER) | Q(is_staff=True) | Q(is_superuser=True), is_active=True
            )
        )
    except DatabaseError:  # not migrated yet: no account at all
        return []
    return [
        f"the account '{user.username}' has the demo's published password: change it "
        "(manage.py changepassword) or deactivate the account"
        for user in users
        if user.check_password(DEMO_PASSWORD)
    ]


def refuse_unsafe_start() -> None:
    """ImproperlyConfigured naming every problem, when DEBUG is off and one is found."""
    from django.conf import settings

    if settings.DEBUG:
        return
    problems = (
        unsafe_settings(
            debug=False, secret_key=settings.SECRET_KEY, allowed_hosts=settings.ALLOWED_HOSTS
        )
        + demo_passwords_in_use()
    )
    if problems:
        raise ImproperlyConfigured("Refusing to start with DEBUG off: " + "; ".join(problems))


@checks.register(checks.Tags.security)
def demo_password_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    from django.conf import settings

    if settings.DEBUG:
        return []
    return [checks.Error(problem, id="foley.E001") for problem in demo_passwords_in_use()]
