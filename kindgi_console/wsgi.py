"""WSGI entry point.

The URLconf (and with it every view module) is imported here rather than at the first
request: under `gunicorn --preload` the workers are forked with it loaded, so no worker's
first request waits seconds for the imports, and the modules' memory is shared.
"""

import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kindgi_console.settings")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018  (imports the URLconf; no database is touched)
