"""The WSGI entry point: what it loads is loaded once, and out of the collector's way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_loaded_console_is_frozen_out_of_the_cyclic_collector() -> None:
    """A request that parses a batch sets off full collections: they must not walk the
    modules, URLconf and views loaded at start (a fifth of a batch's time, measured)."""
    probe = "import gc, kindgi_console.wsgi, django.urls as u; print(gc.get_freeze_count(), len(gc.get_objects()))"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "kindgi_console.settings"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    frozen, tracked = map(int, out.stdout.split())
    assert frozen > 50_000 and tracked < frozen / 10, out.stdout
