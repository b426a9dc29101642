"""The systemd units of deploy/systemd run what README.md's walkthrough runs: the same
gunicorn flags, a worker per queue, one beat, as an unprivileged user."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

from tests.deploy.test_deploy_walkthrough import commands, fenced_block

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
CHECKOUT = "/opt/kindgi/console/"
QUEUES = ("runtime", "runs", "periodic", "deliveries")


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((UNITS / name).read_text().replace("\\\n", " "))
    return parser


def exec_start(name: str, instance: str = "") -> list[str]:
    service = unit(name)["Service"]
    line = service["ExecStart"].replace("%i", instance).replace("%H", "%h")
    for assignment in service.get("Environment", "").split():
        variable, value = assignment.split("=", 1)
        line = line.replace("${" + variable + "}", value)
    return [word.removeprefix(CHECKOUT) for word in shlex.split(line)]


def test_the_units_run_the_walkthroughs_processes() -> None:
    processes = [
        argv for argv in commands(fenced_block("walkthrough:setup")) if argv[0].endswith(("gunicorn", "celery"))
    ]
    from_units = [exec_start("kindgi-web.service")]
    from_units += [exec_start("kindgi-worker@.service", queue) for queue in QUEUES]
    from_units += [exec_start("kindgi-beat.service")]
    by_command = {tuple(argv[:6]): argv for argv in processes}
    assert len(processes) == len(from_units)
    # The same commands and flags; the number of worker processes is the operator's (a unit's
    # Environment=KINDGI_WORKER_CONCURRENCY).
    for argv in from_units:
        readme = by_command.get(tuple(argv[:6]))
        assert readme is not None, f"a unit runs what the README does not: {argv}"
        flags = [word for word in readme if word != "--concurrency" and not word.isdigit()]
        assert [word for word in argv if word != "--concurrency" and not word.isdigit()] == flags


def test_every_unit_runs_as_the_unprivileged_user_restarts_and_reads_the_environment_file() -> None:
    for path in sorted(UNITS.glob("*.service")):
        service = unit(path.name)["Service"]
        assert (service["User"], service["Group"]) == ("kindgi", "kindgi"), path.name
        assert service["Restart"] == "always" and service["EnvironmentFile"] == "/etc/kindgi/console.env"
        assert service["WorkingDirectory"] == CHECKOUT.rstrip("/") and service["NoNewPrivileges"] == "yes"
        assert service["ReadWritePaths"] == "/var/lib/kindgi", path.name
