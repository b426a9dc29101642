"""Run the test OpenID provider (tests/oidc_provider) as a process of its own on a free port.

Its RSA signing key is made here (cryptography), its SQLite database is a file of the test's
temporary folder, and `manage` runs its commands (the fixture of client and people) against it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Provider:
    def __init__(self, folder: Path) -> None:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        self.port = _free_port()
        # 127.0.0.1, where the console's live server is `localhost`: the browser keeps their cookies apart.
        self.url = f"http://127.0.0.1:{self.port}"
        self.issuer = f"{self.url}/o"
        self.tamper_file = folder / "tamper"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "KINDGI_", "DATABASE_"))},
            "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
            "OIDC_PROVIDER_DB": str(folder / "provider.sqlite3"),
            "OIDC_PROVIDER_KEY": pem.decode(),
            "OIDC_PROVIDER_TAMPER_FILE": str(self.tamper_file),
            "PYTHONPATH": str(ROOT),
        }
        self.log = folder / "provider.log"

    def manage(self, *args: str) -> None:
        subprocess.run([sys.executable, "-m", "django", *args], env=self.env, cwd=ROOT, check=True, capture_output=True)

    def fixture(self, **fixture: Any) -> None:
        self.manage("provider_fixture", json.dumps(fixture))

    def tamper(self, mode: str) -> None:
        """From now on the token endpoint hands out ID tokens made wrong this way ("" for none)."""
        self.tamper_file.write_text(mode)

    @contextmanager
    def running(self) -> Iterator[Provider]:
        self.manage("migrate", "--noinput")
        with self.log.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{self.port}", "--noreload"],
                env=self.env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                self._wait(process)
                yield self
            finally:
                process.terminate()
                process.wait(timeout=30)

    def _wait(self, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the OpenID provider exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the OpenID provider did not start: {self.log.read_text()[-2000:]}")
