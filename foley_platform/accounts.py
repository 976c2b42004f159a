"""The password reset, its e-mail's link built from FOLEY_SITE_URL: Django's view would build it
from the request's Host header, and with a permissive ALLOWED_HOSTS an attacker who asks for a
victim's reset with `Host: evil.example` would get the victim's token sent to their own host."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import PasswordResetForm


class SiteResetForm(PasswordResetForm):
    def save(self, **options):
        # Django's view passes no domain: the form would take the request's (its Host header).
        # The site's, read per request: the setting is the deployment's, and tests change it.
        options["domain_override"] = urlsplit(settings.FOLEY_SITE_URL).netloc
        options["extra_email_context"] = {"site_url": settings.FOLEY_SITE_URL}
        return super().save(**options)


class PasswordResetView(auth_views.PasswordResetView):
    email_template_name = "registration/password_reset_email.txt"
    form_class = SiteResetForm
