"""The few file operations the sinks need (exists, list, rename, delete, write a small file), on local paths
with ``os`` and on other URIs (``s3://``, ``abfss://``, ``dbfs:/``...) through the Hadoop FileSystem of the
Spark session, so a table's run partition can be written aside and swapped in the same way everywhere.
"""

from __future__ import annotations

import os
import shutil
import uuid


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def local_path(path: str) -> str:
    return path.removeprefix("file://")


class FileSystem:
    """Local files, or a Hadoop FileSystem reached through the session's JVM gateway."""

    def __init__(self, spark, path: str):
        self.local = is_local(path)
        self._spark = spark
        self._fs = None
        if not self.local:
            try:
                jvm = spark.sparkContext._jvm
                conf = spark.sparkContext._jsc.hadoopConfiguration()
                self._jpath = jvm.org.apache.hadoop.fs.Path
                self._fs = self._jpath(path).getFileSystem(conf)
            except Exception:  # Spark Connect has no JVM gateway on the client
                self._fs = None

    @property
    def usable(self) -> bool:
        return self.local or self._fs is not None

    def exists(self, path: str) -> bool:
        if self.local:
            return os.path.exists(local_path(path))
        return bool(self._fs.exists(self._jpath(path)))

    def list_names(self, path: str) -> list[str]:
        if self.local:
            try:
                return sorted(os.listdir(local_path(path)))
            except FileNotFoundError:
                return []
        if not self.exists(path):
            return []
        return sorted(status.getPath().getName() for status in self._fs.listStatus(self._jpath(path)))

    def rename(self, source: str, target: str) -> None:
        if self.local:
            os.rename(local_path(source), local_path(target))
            return
        if not self._fs.rename(self._jpath(source), self._jpath(target)):
            raise OSError(f"could not rename {source} to {target}")

    def delete(self, path: str) -> None:
        if self.local:
            p = local_path(path)
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.exists(p):
                os.remove(p)
            return
        self._fs.delete(self._jpath(path), True)

    def write_text(self, path: str, text: str) -> None:
        """Write ``path`` whole or not at all: a temporary file beside it, then a rename."""
        parent, name = path.rstrip("/").rsplit("/", 1)
        temporary = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
        if self.local:
            os.makedirs(local_path(parent), exist_ok=True)
            with open(local_path(temporary), "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(local_path(temporary), local_path(path))
            return
        stream = self._fs.create(self._jpath(temporary), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()
        if self.exists(path):
            self.delete(path)
        self.rename(temporary, path)

    def read_text(self, path: str) -> str | None:
        if self.local:
            try:
                with open(local_path(path), encoding="utf-8") as handle:
                    return handle.read()
            except FileNotFoundError:
                return None
        if not self.exists(path):
            return None
        stream = self._fs.open(self._jpath(path))
        try:
            reader = self._spark.sparkContext._jvm.java.io.BufferedReader(
                self._spark.sparkContext._jvm.java.io.InputStreamReader(stream, "UTF-8"))
            lines = []
            line = reader.readLine()
            while line is not None:
                lines.append(line)
                line = reader.readLine()
            return "\n".join(lines)
        finally:
            stream.close()
