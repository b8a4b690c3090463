"""Runs ``offsets-audit`` commands in one session of a process of their own: on Spark Connect (a Connect client
cannot share a process with the tests' classic session), or on a classic session built with other settings than
the tests' one (Spark's kafka source and Delta's jars), then the explore notebook's plain script and its Jupyter
form on that session.

    python tests/cli_session.py PLAN.json RESULT.json

``PLAN.json``: ``{"remote": "local[2]" | null, "commands": [[argv...], ...], "script": {env...} | null,
"notebook": {env...} | null}``. A command ``["!copy", FROM, TO]`` copies a folder over another (a log that grows
between two incremental runs); ``["!fingerprint", KEY, OUTPUT, RUN_ID | null, FORMAT]`` takes the tables'
fingerprints under OUTPUT with this session's readers (``table_fingerprints``). The commands go through the CLI's
``main`` one after the other in this process, so the first starts the session (with ``--remote`` when the plan has
one, else from its own ``--config``'s ``spark.conf``) and the others reuse it, as in a notebook or a nightly
driver. The plain script (``notebooks/explore.py``) then runs here on the same session; the notebook
(``notebooks/explore.ipynb``) in a Jupyter kernel of its own that reaches the same server through the ``sc://``
address the local server left in ``SPARK_REMOTE``, as a Databricks client does. ``RESULT.json``: per command its
exit code, stdout and stderr's tail; the fingerprints; the script's and the notebook's outputs; the session's
class.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def _captured(fn) -> dict:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = None
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = fn()
        except SystemExit as exit_:
            code = exit_.code
        except BaseException:  # noqa: BLE001 - reported to the test with its traceback
            traceback.print_exc()
            code = "crash"
    if not isinstance(code, (int, str, type(None))):  # runpy's globals: the script ran to its end
        code = None
    text = stderr.getvalue()
    return {"exit": code, "stdout": stdout.getvalue(),
            "stderr": text if len(text) <= 12000 else f"{text[:6000]}\n[...]\n{text[-6000:]}"}


def _notebook(env: dict) -> dict:
    import nbformat
    from nbclient import NotebookClient

    prefix = Path(env.pop("KERNEL_PREFIX"))
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(prefix),
                    "--name", "offsets-audit-connect"], check=True, capture_output=True)
    os.environ["JUPYTER_PATH"] = str(prefix / "share" / "jupyter")
    # the kernel is a plain client of the server's sc:// address (SPARK_REMOTE, and the token it requires), as a
    # Databricks notebook is: nothing of this process's local-server mode
    kernel_env = {k: v for k, v in os.environ.items()
                  if k not in ("SPARK_LOCAL_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "MPLBACKEND")}
    kernel_env.update(env)
    notebook = nbformat.read(REPO / "notebooks" / "explore.ipynb", as_version=4)
    NotebookClient(notebook, kernel_name="offsets-audit-connect", timeout=600,
                   resources={"metadata": {"path": str(prefix)}}).execute(env=kernel_env)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    return {"errors": [o.get("evalue", "") for o in outputs if o.output_type == "error"],
            "images": sum("image/png" in o.get("data", {}) for o in outputs),
            "stdout": "".join(o.get("text", "") for o in outputs if o.output_type == "stream")}


def main(plan_path: str, result_path: str) -> int:
    from offsets_audit.cli import main as cli_main

    plan = json.loads(Path(plan_path).read_text())
    result: dict = {"commands": [], "fingerprints": {}}
    for i, argv in enumerate(plan["commands"]):
        if argv[0] == "!copy":
            shutil.copytree(argv[1], argv[2], dirs_exist_ok=True)
            continue
        if argv[0] == "!fingerprint":
            from pyspark.sql import SparkSession

            from table_fingerprints import fingerprints

            key, output, run_id, fmt = argv[1:]
            try:
                result["fingerprints"][key] = fingerprints(SparkSession.getActiveSession(), Path(output), run_id,
                                                           fmt)
            except Exception as error:  # noqa: BLE001 - reported to the test, beside the commands' outputs
                result["fingerprints"][key] = {"error": f"{type(error).__name__}: {error}"}
            continue
        # the first as typed, `offsets-audit <command> --remote <address> ...`, starts the session; the others find
        # it active, as in a notebook or a nightly driver
        line = [argv[0], "--remote", plan["remote"], *argv[1:]] if i == 0 and plan.get("remote") else list(argv)
        result["commands"].append({"argv": line, **_captured(lambda: cli_main(line))})
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    result["session"] = f"{type(session).__module__}.{type(session).__name__}" if session is not None else None
    result["remote"] = os.environ.get("SPARK_REMOTE")
    if plan.get("script") is not None:
        os.environ.update(plan["script"])
        result["script"] = _captured(lambda: runpy.run_path(str(REPO / "notebooks" / "explore.py"),
                                                            run_name="__main__"))
    if plan.get("notebook") is not None:
        try:
            result["notebook"] = _notebook(dict(plan["notebook"]))
        except BaseException as error:  # noqa: BLE001 - reported to the test
            result["notebook"] = {"errors": [f"{type(error).__name__}: {error}"], "images": 0, "stdout": ""}
    Path(result_path).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
