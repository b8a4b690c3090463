"""Kafka's and Spark's jars for the tests, resolved by Maven, and the project's Java helpers compiled against them.

The poms live in ``tests/kafka/`` and are resolved with ``mvn dependency:copy-dependencies`` (the machine's own
Maven, as set up: its settings, mirrors and local repository) into ``.cache/`` at the repository root, which git
ignores. Nothing is downloaded by hand and no registry is named here, so a user's machine that reaches Maven
Central (or a mirror of it) resolves the same jars the same way.

Each resolution leaves a stamp naming the pom's content and the properties it was resolved with; a changed pom
or version resolves again. A file lock keeps two processes (pytest workers, a ``make`` target and a test) from
resolving or compiling into the same folder at once.

The Java helpers (``tests/kafka/java/``: the scenario driver of real clients, the coordinator oracle) are
compiled with the JDK's ``javac`` per Kafka version into ``.cache/kafka/<version>/classes``, so one source tree
serves every version of the matrix; a source file that needs a newer Kafka than the one being built sits under
``java/<first version>/`` and is left out of older builds, and a file there replaces the one with the same relative
path in ``java/common`` or a lower version's folder (one class, one source per range of Kafka versions).

Command line (used by ``make kafka``)::

    python tests/kafka_jars.py kafka [VERSION ...]     # resolve Kafka's jars and compile the helpers
    python tests/kafka_jars.py spark                   # resolve Spark's kafka connector and Delta's jars
    python tests/kafka_jars.py classpath VERSION       # print the classpath of a version (jars + helpers)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

REPO = Path(__file__).resolve().parents[1]
POMS = REPO / "tests" / "kafka"
JAVA_SOURCES = POMS / "java"
CACHE = Path(os.environ.get("OFFSETS_AUDIT_JAR_CACHE", REPO / ".cache"))

#: The Kafka version the default suite runs against.
DEFAULT_KAFKA_VERSION = "4.4.0"
#: The versions of ``make test-kafka-versions`` (one per line of Kafka releases the product claims to read).
KAFKA_VERSIONS = ("3.9.1", "4.0.2", "4.2.1", "4.4.0")


class JarsUnavailable(RuntimeError):
    """Maven or the JDK is missing, or Maven could not resolve the jars (no route to a repository)."""


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _stamp_of(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _read_stamp(folder: Path) -> str | None:
    try:
        return (folder / ".stamp").read_text().strip()
    except OSError:
        return None


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise JarsUnavailable(f"{name} not found on PATH: install it (the project's tests need Maven and a JDK 17)")
    return found


def resolve(pom: Path, dest: Path, properties: dict[str, str] | None = None) -> list[Path]:
    """The jars of ``pom``'s dependencies (transitively) in ``dest``, resolved by Maven unless already there."""
    properties = dict(properties or {})
    stamp = _stamp_of(pom.read_text(), json.dumps(properties, sort_keys=True))
    with _locked(dest):
        if _read_stamp(dest) != stamp:
            shutil.rmtree(dest, ignore_errors=True)
            staging = dest.with_name(dest.name + ".partial")
            shutil.rmtree(staging, ignore_errors=True)
            command = [_tool("mvn"), "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                       f"-DoutputDirectory={staging}"]
            command += [f"-D{key}={value}" for key, value in sorted(properties.items())]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                errors = [line for line in done.stdout.splitlines() if "ERROR" in line][:3]
                raise JarsUnavailable(f"mvn could not resolve {pom.name} {properties}: " + " ".join(errors))
            (staging / ".stamp").write_text(stamp + "\n")
            staging.rename(dest)
    return sorted(dest.glob("*.jar"))


def kafka_home(version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """``.cache/kafka/<version>``: ``libs/`` (Kafka's jars) and ``classes/`` (the project's Java helpers)."""
    return CACHE / "kafka" / version


def kafka_libs(version: str = DEFAULT_KAFKA_VERSION) -> list[Path]:
    """Kafka ``version``'s broker, tools, clients, Streams and coordinator jars, resolved if missing."""
    return resolve(POMS / "kafka.pom.xml", kafka_home(version) / "libs", {"kafka.version": version})


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def java_sources(version: str) -> list[Path]:
    """The helper sources a Kafka ``version`` compiles: ``java/common`` and every ``java/<v>`` with v ≤ version.

    A file under ``java/<v>/`` replaces the file with the same relative path from ``java/common`` or from a lower
    ``java/<v>``, so a class whose code must differ between Kafka versions (an internal API that changed) keeps one
    name with one source per range of versions: the highest folder not above ``version`` wins.
    """
    if not JAVA_SOURCES.is_dir():
        return []
    folders = [folder for folder in JAVA_SOURCES.iterdir() if folder.is_dir()
               and (folder.name == "common"
                    or (folder.name[0].isdigit() and _version_key(folder.name) <= _version_key(version)))]
    folders.sort(key=lambda folder: (-1,) if folder.name == "common" else _version_key(folder.name))
    chosen: dict[Path, Path] = {}
    for folder in folders:
        for path in folder.rglob("*.java"):
            chosen[path.relative_to(folder)] = path
    return [chosen[relative] for relative in sorted(chosen)]


def helper_classes(version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """The project's Java helpers compiled against Kafka ``version``'s jars (again when a source changed)."""
    libs = kafka_libs(version)
    sources = java_sources(version)
    classes = kafka_home(version) / "classes"
    stamp = _stamp_of(version, *(f"{path.relative_to(JAVA_SOURCES)}\0{path.read_text()}" for path in sources))
    with _locked(classes):
        if _read_stamp(classes) != stamp:
            shutil.rmtree(classes, ignore_errors=True)
            staging = classes.with_name("classes.partial")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
            if sources:
                command = [_tool("javac"), "--release", "17", "-nowarn", "-encoding", "UTF-8", "-d", str(staging),
                           "-cp", os.pathsep.join(str(jar) for jar in libs), *map(str, sources)]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    raise JarsUnavailable(f"javac failed for Kafka {version}:\n{done.stderr[-4000:]}")
            (staging / ".stamp").write_text(stamp + "\n")
            staging.rename(classes)
    return classes


def classpath(version: str = DEFAULT_KAFKA_VERSION) -> str:
    """Kafka ``version``'s jars and the helpers compiled for it, as a ``java -cp`` argument."""
    return os.pathsep.join([str(helper_classes(version)), str(kafka_home(version) / "libs" / "*")])


def java_command(main_class: str, *args: str, version: str = DEFAULT_KAFKA_VERSION,
                 jvm_options: Sequence[str] = ("-Xmx512m", "-XX:+UseSerialGC")) -> list[str]:
    """A ``java`` command line running ``main_class`` (Kafka's or a helper's) on Kafka ``version``'s classpath."""
    return [_tool("java"), *jvm_options, "-cp", classpath(version), main_class, *args]


def spark_connector_jars() -> list[Path]:
    """Spark's ``kafka`` source and Delta's Spark jars (``tests/kafka/spark.pom.xml``), resolved if missing."""
    return resolve(POMS / "spark.pom.xml", CACHE / "spark-jars")


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] not in ("kafka", "spark", "classpath"):
        print(__doc__.split("Command line")[1], file=sys.stderr)
        return 2
    try:
        if argv[0] == "kafka":
            for version in argv[1:] or [DEFAULT_KAFKA_VERSION]:
                classes = helper_classes(version)
                print(f"Kafka {version}: {len(kafka_libs(version))} jars, helpers in {classes}")
        elif argv[0] == "spark":
            print(f"Spark connectors: {len(spark_connector_jars())} jars in {CACHE / 'spark-jars'}")
        else:
            print(classpath(argv[1] if len(argv) > 1 else DEFAULT_KAFKA_VERSION))
    except JarsUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
