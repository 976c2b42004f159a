"""What a production start (DEBUG off) refuses: the settings that would make an internet-facing
site unsafe, each named, all at once.

- SECRET_KEY: empty, the placeholder of `.env.example`, or weak: shorter than 50 characters,
  fewer than 5 distinct ones, or Django's `django-insecure-` example (anyone who guesses it signs
  sessions, the raters' cookies and invitation links).
- ALLOWED_HOSTS: empty (Django would answer no host at all; the usual "fix" is `*`), or a
  wildcard (`*`: the site answers any Host header, so password-reset e-mails and absolute links
  can be made to point at an attacker's host).
- A demo password: an account the demo creates (its organizer, its teams' members) or any
  staff, superuser or organizer account that still logs in with a password the demo prints (it
  is on every copy of the code).

Where each is checked:

- The settings when the settings module loads, in every process (`manage.py check` excepted, so
  that it can list every problem at once).
- Everything, settings and accounts, in Django's checks (`foley.E001` accounts, `foley.E002`
  SECRET_KEY, `foley.E003` ALLOWED_HOSTS, and the warning `foley.W004` for a FOLEY_SITE_URL that
  e-mails' links should not use: `manage.py check --deploy`, `runserver`, `migrate`), at
  the web process's start (wsgi.py, asgi.py) and at a worker's or the scheduler's
  (foley_platform/celery.py).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

EXAMPLE_FILE = Path(__file__).resolve().parent.parent / ".env.example"
# Django's own thresholds for a key that is not "secure" (its deploy check W009).
SECRET_KEY_MIN_LENGTH = 50
SECRET_KEY_MIN_DISTINCT = 5
DJANGO_EXAMPLE_PREFIX = "django-insecure-"
NEW_KEY = "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
REFUSING = "Refusing to start with DEBUG off: "


def example_secret_keys() -> set[str]:
    """The placeholders a copied `.env.example` would carry."""
    keys = {"change-me-to-a-long-random-string", "change-me"}
    if EXAMPLE_FILE.exists():
        for line in EXAMPLE_FILE.read_text().splitlines():
            if line.startswith("SECRET_KEY="):
                keys.add(line.partition("=")[2].strip())
    return keys


def secret_key_problems(secret_key: str) -> list[str]:
    if secret_key in example_secret_keys():
        return [
            f"SECRET_KEY is the example value from .env.example: set a long random one ({NEW_KEY})"
        ]
    weak = []
    if len(secret_key) < SECRET_KEY_MIN_LENGTH:
        weak.append(f"length {len(secret_key)} (at least {SECRET_KEY_MIN_LENGTH})")
    if len(set(secret_key)) < SECRET_KEY_MIN_DISTINCT:
        weak.append(
            f"{len(set(secret_key))} distinct characters (at least {SECRET_KEY_MIN_DISTINCT})"
        )
    if secret_key.startswith(DJANGO_EXAMPLE_PREFIX):
        weak.append(f"Django's example prefix {DJANGO_EXAMPLE_PREFIX!r}")
    if weak:
        return [f"SECRET_KEY is weak: {', '.join(weak)}: set a long random one ({NEW_KEY})"]
    return []


def allowed_hosts_problems(allowed_hosts: list[str]) -> list[str]:
    hosts = [host.strip() for host in allowed_hosts if host.strip()]
    if not hosts:
        return ["ALLOWED_HOSTS is empty: list the site's host names"]
    if wild := [host for host in hosts if "*" in host]:
        return [
            f"ALLOWED_HOSTS has the wildcard {', '.join(map(repr, wild))}: the site would answer "
            "any Host header (links in e-mails, such as password resets, could point elsewhere); "
            "list the site's host names"
        ]
    return []


def unsafe_settings(*, debug: bool, secret_key: str, allowed_hosts: list[str]) -> list[str]:
    """One line per unsafe setting, naming it; none with DEBUG on."""
    if debug:
        return []
    return secret_key_problems(secret_key) + allowed_hosts_problems(allowed_hosts)


def demo_passwords() -> dict[str, str]:
    """The accounts the demo creates, each with the password the demo prints for it."""
    from stimuli.demo import DEMO_PASSWORD, DEMO_USER
    from stimuli.submissions.demo import DEMO_TEAMS, MEMBER_PASSWORD

    return {DEMO_USER: DEMO_PASSWORD} | {member: MEMBER_PASSWORD for _, member, *_ in DEMO_TEAMS}


def demo_passwords_in_use() -> list[str]:
    """Accounts that still log in with one of the demo's published passwords: the demo's own,
    and every account that can organize (staff, superuser, a challenge's role, the organizers
    group). Each check hashes the password (slow by design), so the many raters' and team
    members' accounts are not tried: none of them was given a demo password by the platform."""
    from django.contrib.auth import get_user_model
    from django.db import DatabaseError
    from django.db.models import Q

    from stimuli.permissions import ORGANIZERS_GROUP

    demo = demo_passwords()
    published = sorted(set(demo.values()))
    can_organize = (
        Q(is_staff=True)
        | Q(is_superuser=True)
        | Q(challenge_roles__isnull=False)
        | Q(groups__name=ORGANIZERS_GROUP)
    )
    users = get_user_model().objects.filter(is_active=True)
    try:
        organizing = set(users.filter(can_organize).values_list("pk", flat=True))
        tried = list(
            users.filter(Q(username__in=list(demo)) | Q(pk__in=organizing)).order_by("username")
        )
    except DatabaseError:  # not migrated yet: no account at all
        return []

    def candidates(user) -> list[str]:
        # A demo account its own password first; an organizing account every one.
        own = [demo[user.username]] if user.username in demo else []
        return own + [p for p in published if p not in own] if user.pk in organizing else own

    return [
        f"the account '{user.username}' has the demo's published password: change it "
        "(manage.py changepassword) or deactivate the account"
        for user in tried
        if user.has_usable_password() and any(user.check_password(p) for p in candidates(user))
    ]


def _settings_problems() -> list[tuple[str, str]]:
    from django.conf import settings

    return [("foley.E002", p) for p in secret_key_problems(settings.SECRET_KEY)] + [
        ("foley.E003", p) for p in allowed_hosts_problems(settings.ALLOWED_HOSTS)
    ]


def start_problems() -> list[tuple[str, str]]:
    """(check id, message) for every reason not to start; none with DEBUG on."""
    from django.conf import settings

    if settings.DEBUG:
        return []
    return _settings_problems() + [("foley.E001", p) for p in demo_passwords_in_use()]


def refuse_unsafe_start() -> None:
    """ImproperlyConfigured naming every problem, when DEBUG is off and one is found."""
    if problems := start_problems():
        raise ImproperlyConfigured(REFUSING + "; ".join(message for _, message in problems))


def site_url_problems(site_url: str, allowed_hosts: list[str]) -> list[str]:
    """FOLEY_SITE_URL starts every link in an e-mail: over HTTPS, at a host the site answers."""
    from django.http.request import validate_host

    parts = urlsplit(site_url)
    problems = []
    if parts.scheme != "https":
        problems.append(
            f"FOLEY_SITE_URL is {site_url!r}: links in e-mails (password resets, sign-up "
            "confirmations) would go over plain HTTP; set the site's https:// address"
        )
    if parts.hostname and not validate_host(parts.hostname, allowed_hosts):
        problems.append(
            f"FOLEY_SITE_URL's host {parts.hostname!r} is not in ALLOWED_HOSTS: links in "
            "e-mails would point at a site this one is not"
        )
    return problems


@checks.register(checks.Tags.security)
def production_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Every reason not to start, as errors: `manage.py check --deploy` lists them all. A site
    address that links should not use is a warning: a site that sends no e-mail runs safely."""
    from django.conf import settings

    found: list[checks.CheckMessage] = [
        checks.Error(message, id=check_id) for check_id, message in start_problems()
    ]
    if not settings.DEBUG:
        found += [
            checks.Warning(message, id="foley.W004")
            for message in site_url_problems(settings.FOLEY_SITE_URL, settings.ALLOWED_HOSTS)
        ]
    return found
