import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foley_platform.settings")
application = get_asgi_application()

# As wsgi.py: with DEBUG off the web process does not start unsafe (foley_platform/safety.py).
from foley_platform.safety import refuse_unsafe_start  # noqa: E402  (needs the apps loaded)

refuse_unsafe_start()
