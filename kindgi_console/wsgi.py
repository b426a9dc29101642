"""WSGI entry point.

The URLconf (and with it every view module) is imported here rather than at the first
request: under `gunicorn --preload` the workers are forked with it loaded, so no worker's
first request waits seconds for the imports, and the modules' memory is shared.

What is loaded then lives as long as the process: `gc.freeze()` moves it out of the cyclic
collector's reach. A request that parses a batch makes tens of thousands of objects, and
each full collection it sets off would otherwise walk the whole loaded console (a fifth of
an ingested batch's time, measured); under `--preload` it also keeps the collector from
writing to the pages the workers share.
"""

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kindgi_console.settings")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018  (imports the URLconf; no database is touched)
gc.freeze()
