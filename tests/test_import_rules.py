"""tools/check_imports.py, the checker `make check` runs before pytest, on small packages made here."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_modules import REPO, load_script

TOOL = REPO / "tools" / "check_imports.py"


@pytest.fixture(scope="module")
def checker():
    return load_script("tools/check_imports.py", "check_imports")


def package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_package_keeps_the_rules(checker):
    assert checker.main(["check_imports", str(TOOL.parents[1] / "src" / "offsets_audit")]) == 0


def test_a_cycle_through_a_function_level_import_is_found(checker, tmp_path):
    root = package(tmp_path, {"a.py": "from pkg.b import g\n",
                              "b.py": "def g():\n    from pkg.a import f\n    return f\n"})
    graph, problems = checker.scan(root)
    assert problems == [] and checker.cycles(graph) == [["pkg.a", "pkg.b"]]


def test_from_package_import_submodule_depends_on_the_package_init(checker, tmp_path):
    root = package(tmp_path, {"__init__.py": "from pkg.runner import run\n", "runner.py": "from pkg import tools\n",
                              "tools.py": ""})
    graph, _ = checker.scan(root)
    assert checker.cycles(graph) == [["pkg", "pkg.runner"]]
    root = package(tmp_path / "fixed", {"__init__.py": "from pkg.runner import run\n",
                                        "runner.py": "import pkg.tools as tools\n", "tools.py": ""})
    assert checker.cycles(checker.scan(root)[0]) == []


def test_private_names_of_another_module_are_refused_however_reached(checker, tmp_path):
    root = package(tmp_path, {"a.py": "_LIMIT = 3\n",
                              "b.py": "from pkg.a import _LIMIT\n",
                              "c.py": "import pkg.a as a\n\nprint(a._LIMIT)\n",
                              "d.py": "from pkg import a\n\nprint(a.__name__)\n"})
    _, problems = checker.scan(root)
    assert [p.split(":")[0].rsplit("/", 1)[-1] for p in problems] == ["b.py", "c.py"]
    assert all("_LIMIT" in p for p in problems)
