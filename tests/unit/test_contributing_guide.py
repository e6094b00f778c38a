"""docs/contributing.md names files, modules, classes and lists; each of them exists."""

from __future__ import annotations

import importlib
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "tabmem"
GUIDE = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
SPANS = sorted(set(re.findall(r"`([^`\n]+)`", GUIDE)))

PATH = re.compile(r"^[\w.*/-]+(/|\.(py|yaml|md|json|toml))$|^\.ci/\w+$")
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
NAME = re.compile(r"^@?([A-Z][A-Za-z]+|[A-Z_]{4,}|[a-z]+(_[a-z]+){1,3})$")
BASES = (ROOT, PACKAGE, ROOT / "docs", ROOT / "conf" / "test", ROOT / "tests")


def _exists(span: str) -> bool:
    return any(any(base.glob(span.rstrip("/"))) for base in BASES)


@cache
def _sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(PACKAGE.rglob("*.py")))


@cache
def _configs() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "conf").rglob("*.yaml")))


def _defined(name: str) -> bool:
    """A class, function, module or module-level name of the package, a field or string it
    declares (a setting, a claim), or a key of a config file."""
    code = rf"^\s*(class|def) {name}\b|^\s*{name}\s*[:=]|\"{name}\""
    return (
        re.search(code, _sources(), re.MULTILINE) is not None
        or re.search(rf"^\s*{name}:", _configs(), re.MULTILINE) is not None
        or any(PACKAGE.rglob(f"{name}.py"))
    )


def _resolves(dotted: str) -> bool:
    """``a.b.c`` is a module of the package (or ``tabmem`` itself) and attributes under it;
    ``Class.attr`` is an attribute of a class the package defines."""
    parts = dotted.split(".")
    if parts[0][:1].isupper():
        module = _module_defining(parts[0])
        return module is not None and _has(importlib.import_module(module), parts)
    for prefix in ("", "tabmem."):
        for cut in range(len(parts), 0, -1):
            try:
                module = importlib.import_module(prefix + ".".join(parts[:cut]))
            except ImportError:
                continue
            return _has(module, parts[cut:])
    return False


def _module_defining(name: str) -> str | None:
    for path in sorted(PACKAGE.rglob("*.py")):
        if re.search(rf"^class {name}\b", path.read_text(encoding="utf-8"), re.MULTILINE):
            relative = path.relative_to(PACKAGE.parent).with_suffix("")
            return ".".join(relative.parts)
    return None


def _has(obj: object, names: list[str]) -> bool:
    for name in names:
        if not hasattr(obj, name):
            return False
        obj = getattr(obj, name)
    return True


def test_the_guide_names_files_modules_and_names_at_all():
    paths = [s for s in SPANS if PATH.match(s) and "<" not in s]
    assert len(paths) > 30
    assert any(DOTTED.match(s) for s in SPANS)


@pytest.mark.parametrize("span", [s for s in SPANS if PATH.match(s) and "<" not in s])
def test_every_path_the_guide_names_exists(span):
    assert _exists(span), f"docs/contributing.md names `{span}`, which the repository lacks"


@pytest.mark.parametrize(
    "span",
    [
        s
        for s in SPANS
        if DOTTED.match(s) and not PATH.match(s) and not s.startswith(("ctx.", "params."))
    ],
)
def test_every_module_and_attribute_the_guide_names_resolves(span):
    assert _resolves(span), f"docs/contributing.md names `{span}`, which does not resolve"


@pytest.mark.parametrize(
    "span",
    [
        s.lstrip("@")
        for s in SPANS
        if NAME.match(s) and (s[:1].isupper() or s.startswith("@") or "_" in s)
    ],
)
def test_every_class_function_and_list_the_guide_names_is_defined(span):
    if _exists(span) or _exists(f"{span}.yaml"):
        return  # a suite or file named without its folder
    assert _defined(span), f"docs/contributing.md names `{span}`, which the package lacks"
