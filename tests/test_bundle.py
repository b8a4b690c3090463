"""The Databricks bundle (``databricks.yml``): a typo or a stale name fails here, not at ``databricks bundle deploy``.

Its resources are loaded with the ``databricks-bundles`` package, which turns them into the typed job model the
Databricks CLI hands to Python code, refusing unknown fields, missing required ones and values outside an
enumeration. The bundle's own sections (``bundle``, ``variables``, ``artifacts``, ``targets``) are checked against
the keys the bundle schema allows there. What ties the bundle to this repository is checked too: the wheel
``make dist`` builds, the package's entry point, the notebook and its widgets, and that the audit task's
parameters are a command line ``offsets-audit run`` accepts.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO / "databricks.yml"

#: The keys the bundle schema allows at the top level and in the sections the job model does not cover.
ROOT_KEYS = {"artifacts", "bundle", "environments", "experimental", "include", "permissions", "presets", "python",
             "resources", "run_as", "scripts", "sync", "targets", "variables", "workspace"}
BUNDLE_KEYS = {"cluster_id", "compute_id", "databricks_cli_version", "deployment", "engine", "git", "name", "uuid"}
VARIABLE_KEYS = {"default", "description", "lookup", "type"}
ARTIFACT_KEYS = {"build", "dynamic_version", "executable", "files", "path", "type"}
TARGET_KEYS = {"artifacts", "bundle", "cluster_id", "compute_id", "default", "git", "mode", "permissions", "presets",
               "resources", "run_as", "sync", "variables", "workspace"}
WORKSPACE_KEYS = {"artifact_path", "file_path", "host", "profile", "resource_path", "root_path", "state_path"}
MODES = {"development", "production"}

_VARIABLE = re.compile(r"\$\{var\.([A-Za-z0-9_-]+)\}")
_JOB_PARAMETER = re.compile(r"\{\{job\.parameters\.([A-Za-z0-9_]+)\}\}")


@pytest.fixture(scope="module")
def bundle() -> dict:
    return yaml.safe_load(BUNDLE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def project() -> dict:
    with open(REPO / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["project"]


@pytest.fixture(scope="module")
def job(bundle):
    from databricks.bundles.jobs import Job

    return Job.from_dict(bundle["resources"]["jobs"]["nightly_audit"])


def _strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def test_the_bundles_sections_hold_only_keys_the_bundle_schema_allows(bundle):
    assert set(bundle) <= ROOT_KEYS
    assert set(bundle["bundle"]) <= BUNDLE_KEYS and bundle["bundle"]["name"]
    for name, variable in bundle["variables"].items():
        assert set(variable) <= VARIABLE_KEYS, name
        assert variable.get("description"), f"variable {name} says what it is for"
    for name, artifact in bundle["artifacts"].items():
        assert set(artifact) <= ARTIFACT_KEYS, name
        assert all(set(item) == {"source"} for item in artifact["files"]), name
    assert {"dev", "prod"} <= set(bundle["targets"])
    for name, target in bundle["targets"].items():
        assert set(target) <= TARGET_KEYS, name
        assert target["mode"] in MODES, name
        assert set(target.get("workspace") or {}) <= WORKSPACE_KEYS, name
        assert set(target.get("variables") or {}) <= set(bundle["variables"]), name
    assert [name for name, target in bundle["targets"].items() if target.get("default")] == ["dev"]


def test_every_resource_loads_into_the_job_model_of_databricks_bundles(bundle, job):
    from databricks.bundles.jobs import Job

    assert set(bundle["resources"]) == {"jobs"}
    for name, spec in bundle["resources"]["jobs"].items():
        assert isinstance(Job.from_dict(spec), Job), name
    assert [task.task_key for task in job.tasks] == ["audit", "explore"]
    assert job.job_clusters and all(task.job_cluster_key == "audit" for task in job.tasks)


def test_a_misspelt_field_or_value_is_refused_by_the_job_model(bundle):
    """The check the tests above rely on: the job model is strict, not a bag of keys."""
    import copy

    from databricks.bundles.jobs import Job

    spec = copy.deepcopy(bundle["resources"]["jobs"]["nightly_audit"])
    spec["tasks"][0]["python_wheel_tsk"] = spec["tasks"][0].pop("python_wheel_task")
    with pytest.raises(ValueError, match="python_wheel_tsk"):
        Job.from_dict(spec)
    spec = copy.deepcopy(bundle["resources"]["jobs"]["nightly_audit"])
    spec["job_clusters"][0]["new_cluster"]["data_security_mode"] = "SINGLE_USR"
    with pytest.raises(ValueError, match="SINGLE_USR"):
        Job.from_dict(spec)


def test_every_variable_and_job_parameter_used_is_declared_and_every_one_declared_is_used(bundle):
    used = {m for text in _strings({k: v for k, v in bundle.items() if k != "variables"}) for m in _VARIABLE.findall(text)}
    assert used == set(bundle["variables"])
    job = bundle["resources"]["jobs"]["nightly_audit"]
    declared = {parameter["name"] for parameter in job["parameters"]}
    assert {m for text in _strings(job["tasks"]) for m in _JOB_PARAMETER.findall(text)} == declared


def test_the_artifact_is_the_wheel_make_dist_builds_and_every_task_installs_it(bundle, project):
    (artifact,) = bundle["artifacts"].values()
    assert artifact["type"] == "whl" and artifact["build"] == "make dist"
    assert re.search(r"^dist:.*\n(\t.*\n)*\t.*pip wheel --no-deps -w dist \.", (REPO / "Makefile").read_text(), re.M)
    wheel = f"{project['name'].replace('-', '_')}-{project['version']}-py3-none-any.whl"  # pure Python (setup.py)
    (source,) = artifact["files"]
    assert fnmatch.fnmatch(f"dist/{wheel}", source["source"])
    for task in bundle["resources"]["jobs"]["nightly_audit"]["tasks"]:
        assert [fnmatch.fnmatch(f"./dist/{wheel}", library["whl"]) for library in task["libraries"]] == [True]


def test_the_wheel_task_calls_the_packages_task_entry_point(job, project):
    import importlib

    task = job.tasks[0].python_wheel_task
    assert re.sub(r"[-_.]+", "_", task.package_name) == re.sub(r"[-_.]+", "_", project["name"])
    module, _, function = project["scripts"][task.entry_point].partition(":")
    assert callable(getattr(importlib.import_module(module), function))
    assert task.parameters[0] == "run" and "{{job.run_id}}" in task.parameters


def test_the_task_entry_point_fails_the_task_on_a_mistake(tmp_path, capsys):
    """A Databricks wheel task ignores the returned status: a mistake must raise, with its one line printed."""
    from offsets_audit.cli import task_main

    with pytest.raises(SystemExit) as raised:
        task_main(["run", "--config", str(tmp_path / "missing.yaml")])
    assert raised.value.code == 2
    assert "config file" in capsys.readouterr().err


def test_the_notebook_task_runs_the_repositorys_notebook_with_its_widgets(job):
    notebook_task = job.tasks[1].notebook_task
    notebook = (REPO / notebook_task.notebook_path).resolve()
    assert notebook.is_file() and notebook.read_text().startswith("# Databricks notebook source")
    widgets = set(re.findall(r"dbutils\.widgets\.\w+\(\"(\w+)\"", notebook.read_text()))
    assert set(notebook_task.base_parameters) <= widgets
    assert job.tasks[1].depends_on[0].task_key == "audit"


def test_the_config_file_the_task_names_is_synced_with_the_bundle(job):
    parameters = job.tasks[0].python_wheel_task.parameters
    config = parameters[parameters.index("--config") + 1]
    assert config.startswith("${workspace.file_path}/")
    assert (REPO / config.removeprefix("${workspace.file_path}/")).is_file()


def test_the_wheel_leaves_the_runtimes_pyspark_alone(project):
    """A Databricks Runtime's PySpark is not an installed distribution to pip: a wheel that required pyspark would
    have the cluster install PyPI's over it. PySpark is the ``spark`` extra."""
    names = [re.split(r"[<>=!~ \[;]", requirement, maxsplit=1)[0].lower() for requirement in project["dependencies"]]
    assert "pyspark" not in names
    assert any(requirement.startswith("pyspark") for requirement in project["optional-dependencies"]["spark"])


def test_the_audit_tasks_parameters_are_a_command_line_offsets_audit_run_accepts(job, tmp_path):
    """The task's parameters with the job's values in place (a job parameter's default, the run id) parse as
    ``offsets-audit run`` and load as a config: the catalog, the input and the run id where the job puts them."""
    from offsets_audit.cli import build_parser
    from offsets_audit.config import load_settings
    from offsets_audit.job import overrides_from_args

    values = {"{{job.parameters.input}}": str(tmp_path), "{{job.parameters.output_catalog}}": "main.kafka_audit",
              "{{job.parameters.files_path}}": str(tmp_path / "files"), "{{job.run_id}}": "684231",
              "${workspace.file_path}": str(REPO)}
    arguments = []
    for parameter in job.tasks[0].python_wheel_task.parameters:
        for placeholder, value in values.items():
            parameter = parameter.replace(placeholder, value)
        arguments.append(parameter)
    args = build_parser().parse_args(arguments)
    config = load_settings(args.config, overrides_from_args(args))
    assert config.output.catalog == "main.kafka_audit" and config.output.path == str(tmp_path / "files")
    assert config.source.path == str(tmp_path) and config.run_id == "684231"
