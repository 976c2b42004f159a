import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foley_platform.settings")
application = get_wsgi_application()

# With DEBUG off the web process does not start unsafe (foley_platform/safety.py): the settings
# were checked when they loaded; the accounts with a demo password need the apps.
from foley_platform.safety import refuse_unsafe_start  # noqa: E402  (needs the apps loaded)

refuse_unsafe_start()

from foley_platform.middleware import receipts_first  # noqa: E402  (needs the apps loaded)

application = receipts_first(application)
