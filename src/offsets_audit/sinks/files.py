"""The few file operations the sinks need (exists, list, rename, delete, write and read a small file), so that a
table's run partition can be written aside and swapped in, and the run manifest written last, the same way
everywhere:

* local paths (and mounted ones: ``/dbfs/...``, ``/Volumes/...``) with ``os``;
* other URIs (``s3a://``, ``abfss://``, ``gs://``, ``dbfs:/``...) on a classic session through the session's own
  Hadoop FileSystem (``spark_api.hadoop_file_system``: Spark's credentials and settings);
* the same URIs on Spark Connect, where the client has no JVM, through a Python file system on the same path:
  pyarrow's (S3, GCS, HDFS, Azure) or, for the schemes pyarrow does not know, fsspec's when it is installed.

Where none reaches the path, ``FileSystem.usable`` is False and the callers fall back to what Spark's own writers
guarantee (a note says which).
"""

from __future__ import annotations

import os
import shutil
import uuid

from offsets_audit.spark_api import hadoop_file_system, read_hadoop_text


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def local_path(path: str) -> str:
    return path.removeprefix("file://")


class FileSystem:
    """Local files, or the store of a URI (the session's Hadoop FileSystem, or a Python one on Spark Connect)."""

    def __init__(self, spark, path: str):
        self.local = is_local(path)
        self._store = None
        if not self.local:
            self._store = HadoopStore.open(spark, path) or PythonStore.open(path)

    @property
    def usable(self) -> bool:
        return self.local or self._store is not None

    @property
    def _remote(self) -> HadoopStore | PythonStore:
        """The store of a URI; callers check ``usable`` first, so reaching none here is a caller's mistake."""
        if self._store is None:
            raise OSError("no file system reaches this path (check FileSystem.usable first)")
        return self._store

    @property
    def kind(self) -> str:
        """Which way the paths are reached: ``local``, ``hadoop``, ``pyarrow``, ``fsspec`` or ``none``."""
        return "local" if self.local else ("none" if self._store is None else self._store.kind)

    def exists(self, path: str) -> bool:
        if self.local:
            return os.path.exists(local_path(path))
        return self._remote.exists(path)

    def list_names(self, path: str) -> list[str]:
        if self.local:
            try:
                return sorted(os.listdir(local_path(path)))
            except FileNotFoundError:
                return []
        return sorted(self._remote.list_names(path))

    def rename(self, source: str, target: str) -> None:
        if self.local:
            os.rename(local_path(source), local_path(target))
            return
        self._remote.rename(source, target)

    def delete(self, path: str) -> None:
        if self.local:
            p = local_path(path)
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.exists(p):
                os.remove(p)
            return
        self._remote.delete(path)

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
        self._remote.write_bytes(temporary, text.encode("utf-8"))
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
        return self._remote.read_text(path)


class HadoopStore:
    """A URI's Hadoop FileSystem, with the classic session's configuration."""

    kind = "hadoop"

    def __init__(self, spark, fs, path_class):
        self._spark = spark
        self._fs = fs
        self._path = path_class

    @classmethod
    def open(cls, spark, path: str) -> HadoopStore | None:
        try:
            found = hadoop_file_system(spark, path)
        except Exception:  # no FileSystem for the scheme: the Python ones may know it
            return None
        return None if found is None else cls(spark, *found)

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def list_names(self, path: str) -> list[str]:
        if not self.exists(path):
            return []
        return [status.getPath().getName() for status in self._fs.listStatus(self._path(path))]

    def rename(self, source: str, target: str) -> None:
        if not self._fs.rename(self._path(source), self._path(target)):
            raise OSError(f"could not rename {source} to {target}")

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), True)

    def write_bytes(self, path: str, data: bytes) -> None:
        stream = self._fs.create(self._path(path), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def read_text(self, path: str) -> str:
        stream = self._fs.open(self._path(path))
        try:
            return read_hadoop_text(self._spark, stream)
        finally:
            stream.close()


class PythonStore:
    """A URI's file system from pyarrow (``pyarrow.fs.FileSystem.from_uri``) or else fsspec, for a client
    without a JVM (Spark Connect). Paths below the URI it was opened on map by prefix; others are resolved."""

    def __init__(self, kind: str, fs, uri: str, root: str):
        self.kind = kind
        self._fs = fs
        self._uri = uri.rstrip("/")
        self._root = root.rstrip("/")

    @classmethod
    def open(cls, path: str) -> PythonStore | None:
        try:
            import pyarrow.fs as pafs

            fs, root = pafs.FileSystem.from_uri(path)
            return cls("pyarrow", fs, path, root)
        except Exception:  # noqa: BLE001 - a scheme pyarrow does not know (or no credentials): try fsspec
            pass
        try:
            from fsspec.core import url_to_fs

            fs, root = url_to_fs(path)
            return cls("fsspec", fs, path, root)
        except Exception:  # noqa: BLE001 - fsspec missing, or no implementation installed for the scheme
            return None

    def _p(self, path: str) -> str:
        path = path.rstrip("/")
        if path == self._uri or path.startswith(self._uri + "/"):
            return self._root + path[len(self._uri):]
        if self.kind == "pyarrow":
            import pyarrow.fs as pafs

            return pafs.FileSystem.from_uri(path)[1]
        from fsspec.core import url_to_fs

        return url_to_fs(path)[1]

    def _is_dir(self, path: str) -> bool:
        if self.kind == "pyarrow":
            import pyarrow.fs as pafs

            return self._fs.get_file_info(self._p(path)).type == pafs.FileType.Directory
        return bool(self._fs.isdir(self._p(path)))

    def exists(self, path: str) -> bool:
        if self.kind == "pyarrow":
            import pyarrow.fs as pafs

            return self._fs.get_file_info(self._p(path)).type != pafs.FileType.NotFound
        return bool(self._fs.exists(self._p(path)))

    def list_names(self, path: str) -> list[str]:
        if not self._is_dir(path):
            return []
        if self.kind == "pyarrow":
            import pyarrow.fs as pafs

            return [info.base_name for info in self._fs.get_file_info(pafs.FileSelector(self._p(path)))]
        return [entry.rstrip("/").rsplit("/", 1)[-1] for entry in self._fs.ls(self._p(path), detail=False)]

    def rename(self, source: str, target: str) -> None:
        if self.kind == "pyarrow":
            try:
                self._fs.move(self._p(source), self._p(target))
                return
            except OSError:
                if not self._is_dir(source):
                    raise
            # An object store moves files, not folders: copy the folder's files over, then remove it (what
            # Hadoop's object-store connectors do for a folder rename too).
            import pyarrow.fs as pafs

            root, dest = self._p(source), self._p(target)
            for info in self._fs.get_file_info(pafs.FileSelector(root, recursive=True)):
                if info.type == pafs.FileType.File:
                    self._fs.copy_file(info.path, dest + info.path[len(root):])
            self._fs.delete_dir(root)
            return
        self._fs.mv(self._p(source), self._p(target), recursive=True)

    def delete(self, path: str) -> None:
        if not self.exists(path):
            return
        if self.kind == "pyarrow":
            if self._is_dir(path):
                self._fs.delete_dir(self._p(path))
            else:
                self._fs.delete_file(self._p(path))
            return
        self._fs.rm(self._p(path), recursive=True)

    def write_bytes(self, path: str, data: bytes) -> None:
        if self.kind == "pyarrow":
            parent = self._p(path).rsplit("/", 1)[0]
            self._fs.create_dir(parent, recursive=True)  # a file system with folders needs them; a store ignores it
            with self._fs.open_output_stream(self._p(path)) as stream:
                stream.write(data)
            return
        self._fs.makedirs(self._p(path).rsplit("/", 1)[0], exist_ok=True)
        with self._fs.open(self._p(path), "wb") as handle:
            handle.write(data)

    def read_text(self, path: str) -> str:
        if self.kind == "pyarrow":
            with self._fs.open_input_stream(self._p(path)) as stream:
                return stream.read().decode("utf-8")
        with self._fs.open(self._p(path), "rb") as handle:
            return handle.read().decode("utf-8")
