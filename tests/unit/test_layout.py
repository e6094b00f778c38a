"""The package's imports: no circle between modules (imports for type checking included), and
every import between the package's parts points down the layers below (imports only for type
checking may point up)."""

import ast
from itertools import pairwise
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# Bottom first; a part may import only parts of lower layers (and itself).
LAYERS = [
    {"errors", "paths", "results", "cell", "reaper", "markdown", "kept"},
    {"data"},
    {"stats"},
    {"llm"},
    {"prompts"},
    {"battery"},
    {"suites"},
    {"jobs", "tracking"},
    {"preflight"},
    {"lab"},
    {"report"},
    {"execute"},
    {"intake"},
    {"dry_run"},
    {"runner"},
    {"api"},
    {"calibrate"},
    {"rescore"},
    {"main"},
    {"cli"},
    {"tabmem"},
]


def modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(path: Path, known: dict[str, Path], typing: bool = False) -> set[str]:
    """The package's modules that ``path`` imports, at run time (and under TYPE_CHECKING too
    when ``typing``)."""
    tree = ast.parse(path.read_text())
    typing_only = (
        set()
        if typing
        else {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node)
        }
    )
    names = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.add(full if full in known else node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name in known}


def graph(typing: bool = False) -> dict[str, set[str]]:
    known = modules()
    return {name: imported(path, known, typing) - {name} for name, path in known.items()}


def part(module: str) -> str:
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else pieces[0]


def layer(module: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if part(module) in names)


def test_every_part_of_the_package_has_a_layer():
    assert {part(m) for m in modules()} == set().union(*LAYERS)


def test_imports_between_parts_point_down():
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in graph().items()
        for target in targets
        if part(module) != part(target) and layer(target) >= layer(module)
    )
    assert upward == []


def test_no_module_imports_itself_through_others_not_even_for_type_checking():
    edges = graph(typing=True)
    circles = []

    def visit(module: str, path: list[str], on_path: set[str], done: set[str]) -> None:
        for target in sorted(edges[module]):
            if target in on_path:
                circles.append([*path[path.index(target) :], target])
            elif target not in done:
                on_path.add(target)
                visit(target, [*path, target], on_path, done)
                on_path.discard(target)
        done.add(module)

    done: set[str] = set()
    for module in sorted(edges):
        if module not in done:
            visit(module, [module], {module}, done)
    assert circles == []


def test_the_contributing_guide_lists_the_layers_in_order():
    guide = (SRC.parent / "docs" / "contributing.md").read_text()
    table = guide.split("| layer | parts | job |")[1].split("\n\n")[0]
    listed = [
        {name.strip("`/ ") for name in line.split("|")[2].split(",")}
        for line in table.splitlines()[2:]
    ]
    flattened = [name for names in listed for name in sorted(names)]
    expected = [name for names in LAYERS[:-1] for name in sorted(names)]  # tabmem: the package
    assert sorted(flattened) == sorted(expected)
    position = {name: i for i, names in enumerate(listed) for name in names}
    for lower, upper in pairwise(LAYERS[:-1]):
        assert max(position[n] for n in lower) <= min(position[n] for n in upper)
