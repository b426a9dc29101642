"""The README's deployment walkthrough, followed step by step on real processes.

The commands are read from the README's fenced blocks (`<!-- walkthrough:setup -->` and
`<!-- walkthrough:use -->`) and run as written, on a PostgreSQL database and a redis-server of
the test's own; only host names, ports, the database name and the folder are replaced. The
test then plays the TLS proxy: it forwards each `curl` of the README to gunicorn with the
`Host` and `X-Forwarded-Proto` headers a proxy sends. The processes are those the systemd
units of deploy/systemd and the services of deploy/compose.yaml run (test_systemd_units.py,
test_container.py hold them to this block); on them the test waits on /readyz, ingests,
evaluates, scrapes /metrics for the requests it made, and signs a person in through a real
OpenID provider (tests/oidc_provider) into the tenant and role its groups grant.
"""

from __future__ import annotations

import html
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import dj_database_url
import httpx
import pytest
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from kindgi_console.env import DECLARATION
from tests.oidc_provider.server import Provider
from tests.traces.workers import answers, free_port, serving

pytestmark = pytest.mark.services
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PUBLIC_HOST = "console.example.com"


def fenced_block(marker: str) -> str:
    readme = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- {marker} -->\n```sh\n(.*?)```", readme, re.S)
    assert match, f"README.md has no ```sh block after <!-- {marker} -->"
    return match.group(1)


def commands(block: str) -> list[list[str]]:
    """The block's commands, continuation lines joined, comments dropped."""
    found: list[list[str]] = []
    pending = ""
    for line in re.sub(r"\\\n\s*", " ", block).splitlines():
        pending += line + "\n"
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quoted argument (a JSON body) goes on over the next line
            continue
        found += [words] if words else []
        pending = ""
    assert not pending, f"an unclosed quotation in the README's block: {pending}"
    return found


def wait_for(condition: Any, timeout: float, what: str, logs: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    tails = (
        "".join(f"\n--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in sorted(logs.glob("*.log")))
        if logs
        else ""
    )
    raise AssertionError(f"timed out after {timeout} s waiting for {what}{tails}")


@dataclass
class Deployment:
    """What the walkthrough's setup block made: the environment, the processes, the key."""

    folder: Path
    substitutions: dict[str, str]
    database: str
    environ: dict[str, str] = field(default_factory=dict)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    web_port: int = 0

    def word(self, text: str) -> str:
        for old, new in self.substitutions.items():
            text = text.replace(old, new)
        return text

    def run(self, words: list[str]) -> None:
        assignments, argv = _split_assignments(words)
        if argv[:1] == ["export"]:
            self.environ.update(_assignments(argv[1:], self.word))
            return
        environ = {**self.environ, **_assignments(assignments, self.word)}
        argv = [self.word(word) for word in argv]
        if argv[0] == "createdb":
            argv[-1] = self.database
        if argv[0].startswith(".venv/bin/"):
            argv[0] = str(BIN / argv[0].removeprefix(".venv/bin/"))
        if Path(argv[0]).name in ("gunicorn", "celery"):
            self._start(argv, environ)
        else:
            self._run(argv, environ)

    def _run(self, argv: list[str], environ: dict[str, str]) -> None:
        result = subprocess.run(argv, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{shlex.join(argv)} failed:\n{result.stdout}\n{result.stderr}"
        name = argv[2] if Path(argv[0]).name.startswith("python") else Path(argv[0]).name
        self.outputs[name] = result.stdout

    def _start(self, argv: list[str], environ: dict[str, str]) -> None:
        name = "gunicorn" if Path(argv[0]).name == "gunicorn" else f"celery-{argv[3]}-{len(self.processes)}"
        with (self.folder / f"{name}.log").open("wb") as log:
            self.processes.append(
                subprocess.Popen(
                    argv, cwd=ROOT, env=environ, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            )

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _split_assignments(words: list[str]) -> tuple[list[str], list[str]]:
    index = 0
    while index < len(words) and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[index]):
        index += 1
    return words[:index], words[index:]


def _assignments(words: list[str], word: Any) -> dict[str, str]:
    return {name: word(value) for name, _, value in (item.partition("=") for item in words)}


def _base_environ() -> dict[str, str]:
    """The test's environment without any console variable: the README's exports must suffice."""
    return {
        key: value
        for key, value in os.environ.items()
        if key not in DECLARATION.by_name and not key.startswith(("DJANGO_", "CELERY_", "KINDGI_", "DATABASE_"))
    }


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    with serving(process, port, 15, "redis-server to start"):
        yield f"127.0.0.1:{port}/0"


@pytest.fixture
def deployment(tmp_path: Path, redis_url: str) -> Iterator[Deployment]:
    server = dj_database_url.parse(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/kindgi"))
    if "postgresql" not in server["ENGINE"]:
        server = dj_database_url.parse("postgres://postgres@127.0.0.1:5432/kindgi")
    host, port = str(server["HOST"] or "127.0.0.1"), str(server["PORT"] or 5432)
    database = f"kindgi_walkthrough_{os.getpid()}"
    web_port = free_port()
    place = Deployment(
        tmp_path,
        {
            "db.internal:5432/kindgi": f"{host}:{port}/{database}",
            "db.internal": host,
            "redis.internal:6379/0": redis_url,
            "redis.internal:6379/1": redis_url.removesuffix("/0") + "/1",
            "/var/lib/kindgi": str(tmp_path / "var"),
            "127.0.0.1:8000": f"127.0.0.1:{web_port}",
        },
        database,
        environ=_base_environ(),
        web_port=web_port,
    )
    if port != "5432":
        place.substitutions["-h " + host] = f"-h {host} -p {port}"
    dropdb = ["dropdb", "--if-exists", "-h", host, "-p", port, "-U", str(server["USER"] or "postgres"), database]
    subprocess.run(dropdb, capture_output=True, timeout=60)
    try:
        yield place
    finally:
        place.stop()
        subprocess.run([*dropdb[:1], "--force", *dropdb[1:]], capture_output=True, timeout=60)


class Proxy:
    """The TLS proxy in front of gunicorn: the README's curl commands, forwarded."""

    def __init__(self, port: int) -> None:
        self.client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", timeout=30, headers={"Host": PUBLIC_HOST, "X-Forwarded-Proto": "https"}
        )
        self.variables: dict[str, str] = {}

    def curl(self, words: list[str]) -> httpx.Response:
        words = [self._expand(word) for word in words]
        method, headers, data, url = "GET", {}, None, ""
        options = iter(words[1:])
        for word in options:
            if word == "-X":
                method = next(options)
            elif word == "-H":
                name, _, value = next(options).partition(": ")
                headers[name] = value
            elif word == "-d":
                data = next(options)
                method = "POST" if method == "GET" else method
            elif word.startswith("https://"):
                url = word
        assert url.startswith(f"https://{PUBLIC_HOST}/"), url
        if data is not None and data.startswith("@"):
            data = (ROOT / data[1:]).read_text()
        return self.client.request(method, url.removeprefix(f"https://{PUBLIC_HOST}"), headers=headers, content=data)

    def _expand(self, word: str) -> str:
        return re.sub(r"\$([A-Z_]+)", lambda m: self.variables[m.group(1)], word)


SSO_CLIENT_ID, SSO_CLIENT_SECRET = "kindgi-console", "deployment-test-secret"


@pytest.fixture
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    """The company's OpenID provider (tests/oidc_provider), where ada is in the ops group."""
    with Provider(tmp_path_factory.mktemp("oidc-provider")).running() as running:
        running.fixture(
            client={
                "id": SSO_CLIENT_ID,
                "secret": SSO_CLIENT_SECRET,
                "redirect_uri": f"https://{PUBLIC_HOST}/oidc/callback/",
            },
            users=[{"username": "ada", "password": "pw-ada", "email": "ada@example.com", "groups": ["ops"]}],
        )
        yield running


def test_a_deployer_can_follow_the_readme(deployment: Deployment, provider: Provider) -> None:
    setup = commands(fenced_block("walkthrough:setup"))
    # Single sign-on, as the README's "Single sign-on" says: the provider's ops group
    # administers acme.
    deployment.environ.update(
        KINDGI_OIDC_ISSUER=provider.issuer,
        KINDGI_OIDC_CLIENT_ID=SSO_CLIENT_ID,
        KINDGI_OIDC_CLIENT_SECRET=SSO_CLIENT_SECRET,
        KINDGI_OIDC_SCOPES="openid email profile groups",
        KINDGI_OIDC_GROUPS="ops=acme:admin",
    )
    assert {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_DEBUG", "DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS"} <= {
        word.partition("=")[0] for words in setup if words[0] == "export" for word in words[1:]
    }
    for words in setup:
        deployment.run(words)
    assert deployment.environ["DJANGO_DEBUG"] == "false"
    assert deployment.environ["DATABASE_URL"].startswith("postgres://")
    assert deployment.environ["CELERY_BROKER_URL"].startswith("redis://")
    assert [Path(cast(list[str], p.args)[0]).name for p in deployment.processes] == ["gunicorn"] + ["celery"] * 5
    served = {word for p in deployment.processes for word in _queues(cast(list[str], p.args))}
    assert served == {f"kindgi-{role}" for role in settings.KINDGI_QUEUES}, "the README's workers serve every queue"
    wait_for(lambda: answers(deployment.web_port), 120, "gunicorn to listen", deployment.folder)

    proxy = Proxy(deployment.web_port)
    # The socket listens before gunicorn's workers have loaded the application, while every
    # worker process of the deployment loads it too: wait for an answer before the clock of
    # the README's requests starts.
    wait_for(lambda: _answers_a_page(proxy), 120, "gunicorn's workers to answer", deployment.folder)
    proxy.variables["KEY"] = deployment.outputs["create_api_key"].strip().splitlines()[-1]
    assert proxy.variables["KEY"].startswith("kgi_")
    responses = [_follow(proxy, words, deployment) for words in commands(fenced_block("walkthrough:use"))]
    assert [response.status_code for response in responses] == [0, 207, 201, 202, 200]  # 0: the KEY= line
    assert [item["status"] for item in responses[1].json()["results"]] == ["created", "created"]
    assert all(process.poll() is None for process in deployment.processes), "a process of the deployment exited"
    _documented_edges(proxy)
    _people_are_there(deployment)
    _an_operator_can_watch_it(deployment)
    _a_person_signs_in_through_the_provider(deployment, provider)


def _answers_a_page(proxy: Proxy) -> bool:
    try:
        return proxy.client.get("/login/", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def _queues(argv: list[str]) -> list[str]:
    """The queues a `celery worker` command line serves (`-Q a,b`)."""
    return argv[argv.index("-Q") + 1].split(",") if "-Q" in argv else []


def _pending_runtime_evaluations(deployment: Deployment) -> int:
    import psycopg

    with psycopg.connect(deployment.environ["DATABASE_URL"]) as connection:
        row = connection.execute("SELECT count(*) FROM traces_pendingruntimeevaluation").fetchone()
    return int(row[0]) if row else 0


def _follow(proxy: Proxy, words: list[str], deployment: Deployment) -> httpx.Response:
    """One command of the README's use block: an assignment or a curl, through the proxy."""
    if words[0] != "curl":
        assert words == ["KEY=kgi_..."], words
        return httpx.Response(0)
    response = proxy.curl(words)
    assert response.status_code < 400, f"{shlex.join(words)}: {response.status_code} {response.text}"
    if response.request.method == "POST" and response.request.url.path == "/api/v1/evaluations":
        proxy.variables["RUN"] = str(response.json()["id"])
    if response.request.method == "POST" and response.request.url.path == "/api/v1/traces":
        # The traces' runtime evaluation runs on the worker; as the README says, a guardrail
        # added before it has run would already apply to them (halting run-0002).
        wait_for(
            lambda: _pending_runtime_evaluations(deployment) == 0,
            120,
            "the runtime evaluation of the ingested traces",
            deployment.folder,
        )
    if "$RUN" in " ".join(words):
        wait_for(
            lambda: proxy.curl(words).json()["status"] in ("succeeded", "failed"),
            180,
            "the evaluation run to finish",
            deployment.folder,
        )
        response = proxy.curl(words)
        run = response.json()
        assert run["status"] == "succeeded", run
        counts = run["summary"]["no-internal-notes-in-answers"]
        assert (counts["pass"], counts["fail"]) == (1, 1), run
    return response


def _documented_edges(proxy: Proxy) -> None:
    """What the README says a deployer meets without the proxy's header: a page redirected to
    HTTPS and an API call refused (never redirected); and a tenant-bound key that refuses another
    tenant's trace."""
    page = httpx.get(f"{proxy.client.base_url}/login/", headers={"Host": PUBLIC_HOST})
    assert page.status_code == 301
    assert page.headers["location"] == f"https://{PUBLIC_HOST}/login/"
    plain = httpx.get(f"{proxy.client.base_url}/api/v1/traces", headers={"Host": PUBLIC_HOST})
    assert plain.status_code == 403
    assert "location" not in plain.headers
    assert "HTTPS is required" in plain.json()["errors"][0]["message"]
    other = proxy.client.post(
        "/api/v1/traces",
        headers={"Authorization": f"Bearer {proxy.variables['KEY']}"},
        json={"id": "run-9", "tenant": "globex", "output": "hello"},
    )
    assert other.status_code == 403, other.text
    assert "Strict-Transport-Security" in proxy.client.get("/login/").headers


def _people_are_there(deployment: Deployment) -> None:
    import psycopg

    with psycopg.connect(deployment.environ["DATABASE_URL"]) as connection:
        rows = connection.execute(
            "SELECT u.username, u.is_superuser, t.slug, m.role FROM auth_user u "
            "JOIN tenancy_membership m ON m.user_id = u.id JOIN tenancy_tenant t ON t.id = m.tenant_id"
        ).fetchall()
    assert rows == [("admin", True, "acme", "admin")]


def _an_operator_can_watch_it(deployment: Deployment) -> None:
    """docs/operations.md on the deployment: the probes over plain HTTP to gunicorn's own
    address (what a load balancer sends), every worker and beat alive, and the requests the
    README made counted in /metrics under a console-wide key with the metrics scope."""
    direct = f"http://127.0.0.1:{deployment.web_port}"
    assert httpx.get(f"{direct}/healthz").status_code == 200
    ready = httpx.get(f"{direct}/readyz", timeout=10)
    assert ready.status_code == 200, ready.text
    wait_for(
        lambda: httpx.get(f"{direct}/healthz/workers", timeout=10).status_code == 200,
        60,
        "every worker's and beat's heartbeat",
        deployment.folder,
    )
    kinds = [item["kind"] for item in httpx.get(f"{direct}/healthz/workers").json()["processes"]]
    assert sorted(kinds) == ["beat"] + ["worker"] * 4
    deployment.run([".venv/bin/python", "manage.py", "create_api_key", "--scopes", "metrics", "--name", "prometheus"])
    key = deployment.outputs["create_api_key"].strip().splitlines()[-1]
    scraped = httpx.get(f"{direct}/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert scraped.status_code == 200, scraped.text
    counted = {
        (sample.labels["route"], sample.labels["method"], sample.labels["status"]): sample.value
        for family in text_string_to_metric_families(scraped.text)
        if family.name == "kindgi_http_requests"
        for sample in family.samples
        if sample.name == "kindgi_http_requests_total"
    }
    assert counted[("api-traces", "POST", "2xx")] == 1  # the README's batch (the other tenant's was a 403)
    assert counted[("api-guardrails", "POST", "2xx")] == 1
    assert counted[("api-evaluations", "POST", "2xx")] == 1


class Browser:
    """What a browser does behind the TLS proxy: the console's cookies (Secure ones: the
    proxy's side is HTTPS) sent back to it, the provider's to the provider, redirects followed."""

    def __init__(self, web_port: int) -> None:
        self.console = httpx.Client(
            base_url=f"http://127.0.0.1:{web_port}",
            timeout=30,
            headers={"Host": PUBLIC_HOST, "X-Forwarded-Proto": "https"},
        )
        self.elsewhere = httpx.Client(timeout=30)
        self.cookies: dict[str, str] = {}

    def get(self, url: str, **options: Any) -> httpx.Response:
        if url.startswith(f"https://{PUBLIC_HOST}") or url.startswith("/"):
            path = url.removeprefix(f"https://{PUBLIC_HOST}")
            cookie = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
            response = self.console.get(path, headers={"Cookie": cookie} if cookie else {}, **options)
            for header in response.headers.get_list("set-cookie"):
                name, _, rest = header.partition("=")
                self.cookies[name.strip()] = rest.split(";", 1)[0]
            return response
        return self.elsewhere.get(url, **options)

    def follow(self, response: httpx.Response, limit: int = 10) -> httpx.Response:
        for _ in range(limit):
            if response.status_code not in (301, 302, 303, 307):
                return response
            location = response.headers["Location"]
            if location.startswith("/"):
                url = response.request.url
                base = (
                    f"https://{PUBLIC_HOST}" if self.at_console(response) else f"{url.scheme}://{url.netloc.decode()}"
                )
                location = base + location
            response = self.get(location)
        raise AssertionError(f"more than {limit} redirects")

    @staticmethod
    def at_console(response: httpx.Response) -> bool:
        return response.request.headers.get("Host") == PUBLIC_HOST


def _a_person_signs_in_through_the_provider(deployment: Deployment, provider: Provider) -> None:
    """The sign-in page offers the provider; ada signs in there and lands in acme as its admin,
    an account made at that first sign-in because the ops group grants it."""
    browser = Browser(deployment.web_port)
    login = browser.get("/login/")
    assert login.status_code == 200
    start = re.search(r'href="([^"]*oidc/authenticate[^"]*)"', login.text)
    assert start, "the sign-in page offers single sign-on"
    at_provider = browser.follow(browser.get(html.unescape(start.group(1))))
    assert at_provider.request.url.host == "127.0.0.1" and "/accounts/login/" in str(at_provider.request.url)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', at_provider.text)
    nxt = re.search(r'name="next" value="([^"]*)"', at_provider.text)
    assert token and nxt
    signed = browser.elsewhere.post(
        str(at_provider.request.url),
        data={
            "username": "ada",
            "password": "pw-ada",
            "csrfmiddlewaretoken": token.group(1),
            "next": html.unescape(nxt.group(1)),
        },
        headers={"Referer": str(at_provider.request.url)},
    )
    back = browser.follow(signed)
    assert back.status_code == 200 and browser.at_console(back), (back.status_code, back.text[:500])
    assert "ada" in back.text and "Acme Corp" in back.text
    import psycopg

    with psycopg.connect(deployment.environ["DATABASE_URL"]) as connection:
        rows = connection.execute(
            "SELECT t.slug, m.role, m.sso FROM auth_user u JOIN tenancy_membership m ON m.user_id = u.id "
            "JOIN tenancy_tenant t ON t.id = m.tenant_id WHERE u.username = 'ada'"
        ).fetchall()
    assert rows == [("acme", "admin", True)]
