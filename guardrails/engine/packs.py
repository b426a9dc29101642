"""Check packs: Python modules that define checks, loaded when the console starts.

A pack is an importable module that defines its checks with `define_check` and lists them
in a module-level `CHECKS` (a list or tuple of checks) or returns them from a `checks()`
function (for a pack that builds its checks from data). It may declare `__version__`, which
an `oci` code artifact's `artifactVersion` is compared with. The pack's name is its module
name; `load_pack` stamps it (and the version) on every check, so authors need not repeat it.

A check's evaluate function must be a module-level function for the check to run in the
sandbox: a worker imports it by module and name (Check.module / Check.function).

With a `describe` function (the deployment passes the sandbox's), a pack module is imported
only inside a sandbox, under its limits: the console learns each check's id, kind, config
schema and handler as data, and builds checks whose evaluate function imports the module
in the evaluating process only when a guardrail with `sandbox: none` calls it. A check that
validates its config with Python code (`validate_config`) is refused there: the console
does not run a pack's code to register a guardrail.

A `filesystem` code artifact (development only) names a pack-shaped module by its path:
`load_filesystem_check` loads it, and such a check's `module` is that absolute path.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from guardrails.engine.registry import CheckRegistry, InvalidCheckDefinition, define_check
from guardrails.engine.schema import escape_pointer
from guardrails.engine.stages import DEFAULT_STAGES
from guardrails.engine.types import Check, Issue, StrategyError


class PackError(Exception):
    """A pack that cannot be loaded: start-up stops with this message."""


class _Strategies(Protocol):
    def __contains__(self, kind: object) -> bool: ...


@dataclass(frozen=True, slots=True)
class Pack:
    """A loaded pack: its module name, declared version and checks."""

    name: str
    version: str | None
    checks: tuple[Check, ...]


def _declared_checks(module: ModuleType, pack: str) -> list[Check]:
    source: Any = getattr(module, "CHECKS", None)
    if source is None and callable(getattr(module, "checks", None)):
        source = module.checks()
    if source is None:
        raise PackError(f"pack '{pack}' defines neither CHECKS nor checks()")
    if not isinstance(source, Iterable) or isinstance(source, (str, bytes, Mapping)):
        raise PackError(f"pack '{pack}': CHECKS must be a list of checks")
    found = list(source)
    for index, item in enumerate(found):
        if not isinstance(item, Check):
            raise PackError(f"pack '{pack}': item {index} of its checks is not a check")
    return found


def _stamp(checks: list[Check], pack: str, version: str | None) -> tuple[Check, ...]:
    """The pack's checks carrying its name and version; duplicate ids refused."""
    seen: set[str] = set()
    stamped = []
    for check in checks:
        if check.id in seen:
            raise PackError(f"pack '{pack}' defines check '{check.id}' twice")
        seen.add(check.id)
        stamped.append(dataclasses.replace(check, pack=pack, pack_version=version))
    return tuple(stamped)


def _version(module: ModuleType, pack: str) -> str | None:
    version = getattr(module, "__version__", None)
    if version is not None and not isinstance(version, str):
        raise PackError(f"pack '{pack}': __version__ must be a string")
    return version


#: Imports a pack in a sandbox and describes it; None where the host has no sandbox.
Describe = Callable[[str], "Mapping[str, Any] | None"]


class _ImportedOnFirstCall:
    """A described check's evaluate function for `sandbox: none`: imports its module then."""

    def __init__(self, module: str, function: str) -> None:
        self.module, self.function = module, function

    def __call__(self, config: Any, trace: Any) -> Any:
        target: Any = importlib.import_module(self.module)
        for part in self.function.split("."):
            target = getattr(target, part)
        return target(config, trace)


def describe_pack(module_name: str, describe: Describe) -> Pack | None:
    """The pack as a sandbox described it (its module imported only there), or None."""
    try:
        description = describe(module_name)
    except StrategyError as error:
        if str(error).startswith(f"pack '{module_name}'"):  # the pack's own error, from inside
            raise PackError(str(error)) from None
        raise PackError(f"pack '{module_name}' cannot be imported in the sandbox: {error}") from None
    if description is None:
        return None
    checks = []
    for item in description.get("checks") or ():
        if item.get("validatesInCode"):
            raise PackError(
                f"pack '{module_name}': check '{item.get('id')}' validates its config with Python "
                "code; the console does not run a pack's code: give it a config_schema"
            )
        checks.append(_described_check(item))
    version = description.get("version")
    return Pack(module_name, version, _stamp(checks, module_name, version))


def _described_check(item: Mapping[str, Any]) -> Check:
    module, function = str(item.get("module") or ""), str(item.get("function") or "")
    try:
        check = define_check(
            str(item.get("id")),
            str(item.get("kind")),
            _ImportedOnFirstCall(module, function),
            config_schema=item.get("configSchema"),
            description=str(item.get("description") or ""),
            stages=item.get("stages") or DEFAULT_STAGES,
        )
    except InvalidCheckDefinition as error:
        raise PackError(f"a described check is invalid: {error}") from error
    return dataclasses.replace(check, module=module or None, function=function or None)


def load_pack(module_name: str, describe: Describe | None = None) -> Pack:
    """Collect a pack's checks (described in a sandbox when `describe` is given, else imported
    here); PackError names the pack and the check."""
    if describe is not None:
        described = describe_pack(module_name, describe)
        if described is not None:
            return described
    try:
        module = importlib.import_module(module_name)
    except InvalidCheckDefinition as error:
        raise PackError(f"pack '{module_name}' has an invalid check: {error}") from error
    except MemoryError:
        raise PackError(f"pack '{module_name}' cannot be imported: memory limit exceeded while importing") from None
    except Exception as error:
        raise PackError(f"pack '{module_name}' cannot be imported: {type(error).__name__}: {error}") from error
    return _pack_from_module(module, module_name)


def _pack_from_module(module: ModuleType, name: str) -> Pack:
    try:
        checks = _declared_checks(module, name)
    except InvalidCheckDefinition as error:
        raise PackError(f"pack '{name}' has an invalid check: {error}") from error
    version = _version(module, name)
    return Pack(name, version, _stamp(checks, name, version))


def load_packs(
    names: Iterable[str],
    registry: CheckRegistry,
    strategies: _Strategies | None = None,
    describe: Describe | None = None,
) -> list[Issue]:
    """Load the named packs into `registry`; the warnings, or PackError on an invalid pack.

    A check whose id is a built-in's is not registered: the built-in replaces it (the
    seed's rule), with a warning naming both. With `strategies`, a check of a kind no
    strategy evaluates is an error.
    """
    warnings: list[Issue] = []
    for name in names:
        pack = load_pack(name, describe)
        for check in pack.checks:
            warning = _register_pack_check(pack, check, registry, strategies)
            if warning is not None:
                warnings.append(warning)
    return warnings


def _register_pack_check(
    pack: Pack, check: Check, registry: CheckRegistry, strategies: _Strategies | None
) -> Issue | None:
    if strategies is not None and check.kind not in strategies:
        raise PackError(
            f"pack '{pack.name}': check '{check.id}' is of kind '{check.kind}', for which no strategy is registered"
        )
    existing = registry.get(check.id)
    if existing is not None and existing.builtin:
        return Issue(
            f"/packs/{escape_pointer(pack.name)}/checks/{escape_pointer(check.id)}",
            f"the built-in check '{existing.id}' replaces check '{check.id}' of pack '{pack.name}'",
        )
    if existing is not None:
        raise PackError(f"pack '{pack.name}': check '{check.id}' is already defined by pack '{existing.pack}'")
    registry.register(check)
    return None


def load_filesystem_check(module_path: str, check_id: str) -> Check:
    """The check `check_id` of the pack-shaped module at an absolute path (development).

    The module is executed afresh each time, so that an author's edits are picked up. The
    check's `module` is the path, which is how a sandbox worker finds it too.
    """
    if not os.path.isabs(module_path):
        raise PackError(f"codeArtifactRef modulePath '{module_path}' is not an absolute path")
    if not os.path.isfile(module_path):
        raise PackError(f"codeArtifactRef modulePath '{module_path}' is not a file")
    name = f"kindgi_filesystem_check_{abs(hash(module_path)):x}"
    spec = importlib.util.spec_from_file_location(name, module_path)
    if spec is None or spec.loader is None:
        raise PackError(f"codeArtifactRef modulePath '{module_path}' is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # so that pickling, dataclasses and typing find it
    try:
        spec.loader.exec_module(module)
        pack = _pack_from_module(module, module_path)
    except PackError:
        raise
    except Exception as error:
        raise PackError(f"'{module_path}' cannot be loaded: {type(error).__name__}: {error}") from error
    for check in pack.checks:
        if check.id == check_id:
            return dataclasses.replace(check, module=module_path)
    raise PackError(f"'{module_path}' defines no check '{check_id}'")


def code_artifact_issues(document: Mapping[str, Any], registry: CheckRegistry) -> list[Issue]:
    """Warnings about a guardrail's code artifact and the check it names.

    A built-in check named with a code artifact and without `checkBuiltIn` (the seed: the
    built-in replaces whatever the artifact ships under its id); an `oci` artifact whose
    `artifactVersion` is not the installed pack's `__version__` (when the pack declares one).
    """
    artifact = document.get("codeArtifactRef")
    check = registry.get(str(document.get("check")))
    if not isinstance(artifact, Mapping) or check is None:
        return []
    if check.builtin:
        return [] if document.get("checkBuiltIn") else [_builtin_named_warning(check)]
    if artifact.get("kind") != "oci" or check.pack_version is None:
        return []
    declared = str(artifact.get("artifactVersion"))
    if declared == check.pack_version:
        return []
    return [
        Issue(
            "/codeArtifactRef/artifactVersion",
            f"artifactVersion '{declared}' is not the version of the installed pack "
            f"'{check.pack}' ({check.pack_version})",
        )
    ]


def _builtin_named_warning(check: Check) -> Issue:
    return Issue(
        "/checkBuiltIn",
        f"'{check.id}' is a built-in check named with a code artifact and without "
        "checkBuiltIn: a check its pack ships under this id is replaced by the built-in",
    )


def resolve_filesystem_artifact(
    document: Mapping[str, Any], registry: CheckRegistry
) -> tuple[list[Issue], list[Issue]]:
    """Load a guardrail's `filesystem` check into `registry`: (errors, warnings).

    Development only (registration refuses the artifact in production and never calls
    this there). The loaded check takes its id in the registry, replacing a pack check of
    that id. A built-in is never replaced: nothing is loaded, and `code_artifact_issues`
    gives the warning when the guardrail does not say `checkBuiltIn`.
    """
    artifact = document.get("codeArtifactRef")
    if not isinstance(artifact, Mapping) or artifact.get("kind") != "filesystem":
        return [], []
    check_id = str(document.get("check"))
    existing = registry.get(check_id)
    if existing is not None and existing.builtin:
        return [], []
    try:
        check = load_filesystem_check(str(artifact.get("modulePath")), check_id)
    except PackError as error:
        return [Issue("/codeArtifactRef/modulePath", str(error))], []
    if check.kind != document.get("kind"):
        # Registering it would replace the check other guardrails name with one they
        # cannot use; define_guardrail reports the kind mismatch at /kind.
        return [
            Issue(
                "/kind",
                f"check '{check.id}' at '{check.module}' is of kind '{check.kind}', not '{document.get('kind')}'",
            )
        ], []
    registry.register(check, replace=True)
    return [], []


def check_needs(
    needs_spec: Mapping[str, Any] | None,
    available_env: Iterable[str] | None,
    available_secrets: Iterable[str] | None,
    capabilities: Iterable[str] | None,
    bindings: Iterable[str] | None,
) -> list[Issue]:
    """What a guardrail's needsSpec declares and the deployment does not provide.

    None for one of the deployment's sets means the deployment does not check that need.
    """
    needs = needs_spec or {}
    wanted = (
        ("env", available_env, "environment variable '{}' is not available"),
        ("secrets", available_secrets, "secret '{}' is not available"),
        ("capabilities", capabilities, "capability '{}' is not available"),
        ("bindings", bindings, "binding '{}' is not available"),
    )
    issues = []
    for key, provided, message in wanted:
        if provided is None:
            continue
        available = frozenset(provided)
        declared = needs.get(key) or ()
        keyed = isinstance(declared, Mapping)
        for index, name in enumerate(declared):
            if name not in available:
                token = escape_pointer(str(name)) if keyed else str(index)
                issues.append(Issue(f"/needsSpec/{key}/{token}", message.format(name)))
    return issues
