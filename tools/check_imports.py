"""Import rules of the package that import-linter's contracts (pyproject.toml) do not express.

    python tools/check_imports.py [src/offsets_audit]

* No import cycles between modules, counting every import statement: module level, inside functions and
  under ``TYPE_CHECKING`` alike (a function-level import hides a cycle from the interpreter, not from a reader).
  ``from package import submodule`` depends on the package's ``__init__`` too; ``import package.submodule``
  and ``from package.submodule import name`` depend on the submodule only.
* No module uses another module's private names (``_x``): neither ``from m import _x`` nor ``m._x``. A helper
  two modules share is public in the module it belongs to.

Exit status 1 with one line per problem (file:line and the fix), 0 when the package keeps both rules.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def module_names(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the package (a package is its ``__init__``)."""
    names = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _own_extension(package_dir: Path, module: str, source: str, name: str) -> bool:
    """``from package import _name`` in a module of ``package`` where ``_name`` is a compiled extension module
    (its C source beside the package's modules): a private submodule used inside its own package."""
    if module.rpartition(".")[0] != source:
        return False
    folder = package_dir.joinpath(*source.split(".")[1:])
    return (folder / f"{name}.c").is_file()


def scan(package_dir: Path) -> tuple[dict[str, set[str]], list[str]]:
    """The import graph (module -> modules it imports) and the private-name problems."""
    modules = module_names(package_dir)
    root = package_dir.name
    graph: dict[str, set[str]] = {name: set() for name in modules}
    problems: list[str] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = path.as_posix()
        module_aliases: dict[str, str] = {}  # local name -> package module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == root or alias.name.startswith(root + "."):
                        graph[module].add(alias.name)
                        if alias.asname:
                            module_aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(module, path, node)
                if source != root and not source.startswith(root + "."):
                    continue
                for alias in node.names:
                    # ``from package import name`` reads the package's namespace even when ``name`` is a
                    # submodule: it depends on the package's ``__init__`` as well as on the submodule.
                    graph[module].add(source)
                    submodule = f"{source}.{alias.name}"
                    if submodule in modules:
                        graph[module].add(submodule)
                        module_aliases[alias.asname or alias.name] = submodule
                        continue
                    if _is_private(alias.name) and source != module and not _own_extension(package_dir, module, source,
                                                                                         alias.name):
                        problems.append(f"{where}:{node.lineno}: imports private {alias.name} from {source}; "
                                        f"make it public in {source} (or move it where both can import it)")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in module_aliases and _is_private(node.attr)
                    and module_aliases[node.value.id] != module):
                problems.append(f"{where}:{node.lineno}: uses private {node.attr} of "
                                f"{module_aliases[node.value.id]}; make it public there")
    for module in graph:
        graph[module].discard(module)
        graph[module] &= modules.keys()
    return graph, problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycle_path(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete loop through the component's first module, for the message."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & members):
            if target == start:
                return paths[node] + [start]
            if target not in paths:
                paths[target] = paths[node] + [target]
                queue.append(target)
    return component


def main(argv: list[str]) -> int:
    package_dir = Path(argv[1] if len(argv) > 1 else "src/offsets_audit")
    graph, problems = scan(package_dir)
    for component in cycles(graph):
        problems.append("import cycle: " + " -> ".join(cycle_path(graph, component))
                        + "; move what both need into a module below them, or invert the dependency")
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_imports: {len(problems)} problem(s) in {package_dir}")
        return 1
    print(f"check_imports: {len(graph)} modules, no import cycles, no private cross-imports")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
