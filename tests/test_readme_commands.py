"""The README's commands work as written, the way chispa tests the examples of its README: the commands are read from
the README itself (its shell blocks and the code spans of its prose and tables), never copied into the test.

Every ``make`` target the README names exists; every ``offsets-audit ...`` command and the spark-submit line's
arguments parse with the command line's own parser; every config file they pass loads and validates; every
script and file they name exists. ``offsets-audit --help`` runs. The quickstart's ``make demo`` itself (a minute
or two of Spark) runs with ``OFFSETS_AUDIT_README_DEMO=1``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from offsets_audit.cli import build_parser
from offsets_audit.config import load_settings
from script_modules import REPO

README = REPO / "README.md"
#: Placeholders the README writes for a value of the reader's own.
PLACEHOLDER = re.compile(r"^(PATH|FILE|HOST:PORT|COMMAND|CATALOG\.SCHEMA|\.\.\.)$")


def readme_commands() -> list[str]:
    """Every command line of the README: the lines of its ``bash`` blocks (comments dropped) and its code spans
    that start with a command this project documents."""
    text = README.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```(?:bash|sh|shell)\n(.*?)```", text, re.S):
        commands += [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    commands += [span.strip() for span in re.findall(r"`([^`\n]+)`", prose)
                 if re.match(r"(make|offsets-audit|spark-submit)\b", span.strip())]
    return list(dict.fromkeys(commands))


COMMANDS = readme_commands()


def _makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return {name for line in text.splitlines() if (match := re.match(r"^([\w.-]+)\s*:(?!=)", line))
            for name in [match.group(1)]}


def _cli_argv(command: str) -> list[str] | None:
    """The arguments ``offsets-audit`` gets for a README command: its own, or the job script's under
    spark-submit (``jobs/nightly_audit.py`` passes them to ``offsets-audit run``); None for other commands."""
    words = shlex.split(command)
    if words[0] == "offsets-audit":
        return words[1:]
    if words[0] == "spark-submit":
        script = next(i for i, w in enumerate(words) if w.endswith(".py"))
        assert (REPO / words[script]).is_file(), f"README runs {words[script]}, which does not exist"
        return ["run", *words[script + 1:]]
    return None


def test_the_readme_documents_commands():
    assert any(c.startswith("make ") for c in COMMANDS) and any(c.startswith("offsets-audit") for c in COMMANDS)


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.startswith("make ")])
def test_every_make_target_the_readme_names_exists(command):
    targets = _makefile_targets()
    for target in shlex.split(command)[1:]:
        assert target in targets, f"README runs `{command}`; the Makefile has no target {target}"


@pytest.mark.parametrize("command", [c for c in COMMANDS if _cli_argv(c) is not None])
def test_every_documented_command_line_parses_and_its_config_loads(command):
    argv = _cli_argv(command)
    assert argv is not None
    if argv in (["COMMAND"], []) or "--help" in argv:
        return  # the generic forms; --help runs below
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        pytest.fail(f"README documents `{command}`, which offsets-audit does not accept")
    config = getattr(args, "config", None)
    if config and not PLACEHOLDER.match(config):
        assert (REPO / config).is_file(), f"README passes --config {config}, which does not exist"
        load_settings(REPO / config)  # a shipped config the README points to must validate


def test_offsets_audit_help_runs_and_lists_every_command():
    from offsets_audit.cli import COMMANDS as SUBCOMMANDS

    assert "offsets-audit --help" in COMMANDS
    proc = subprocess.run([sys.executable, "-m", "offsets_audit.cli", "--help"], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert all(name in proc.stdout for name in SUBCOMMANDS)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("OFFSETS_AUDIT_README_DEMO") != "1",
                    reason="set OFFSETS_AUDIT_README_DEMO=1 to run the README's make demo (a minute or two of Spark)")
def test_the_quickstart_demo_runs_as_written(tmp_path):
    demo = next(c for c in COMMANDS if c.startswith("make ") and "demo" in c)
    proc = subprocess.run(shlex.split(demo), capture_output=True, text=True, cwd=REPO, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "report:" in proc.stdout and "findings" in proc.stdout
