"""``sinks.files``: the file operations of a run's write (a run partition written aside and swapped in, the
manifest written whole), through a Python file system as a Spark Connect client reaches a URI (pyarrow's), on a
``file://`` URI here."""

from __future__ import annotations

from offsets_audit.sinks.files import FileSystem, PythonStore


def test_pyarrow_store_swaps_a_folder_in_and_writes_a_file_whole(tmp_path):
    root = f"file://{tmp_path}/out"
    store = PythonStore.open(root)
    assert store is not None and store.kind == "pyarrow"
    store.write_bytes(f"{root}/t/_staging-1/part-0.parquet", b"rows")
    store.write_bytes(f"{root}/t/run_id=r/part-0.parquet", b"old rows")
    assert store.exists(f"{root}/t/_staging-1") and not store.exists(f"{root}/t/nothing")
    assert sorted(store.list_names(f"{root}/t")) == ["_staging-1", "run_id=r"]
    store.rename(f"{root}/t/run_id=r", f"{root}/t/_replaced-1")
    store.rename(f"{root}/t/_staging-1", f"{root}/t/run_id=r")
    store.delete(f"{root}/t/_replaced-1")
    assert sorted(store.list_names(f"{root}/t")) == ["run_id=r"]
    assert store.read_text(f"{root}/t/run_id=r/part-0.parquet") == "rows"
    assert store.list_names(f"{root}/missing") == []
    store.delete(f"{root}/missing")  # nothing there: nothing to do


def test_a_file_system_on_a_uri_writes_text_whole_through_its_store(tmp_path):
    fs = FileSystem(None, "s3://bucket/out")  # no session: a Connect client's view of an object store URI
    fs._store = PythonStore.open(f"file://{tmp_path}")  # noqa: SLF001 - the store a URI resolves to, pointed here
    assert fs.usable and fs.kind == "pyarrow"
    target = f"file://{tmp_path}/_runs/r.json"
    fs.write_text(target, '{"run_id": "r"}')
    fs.write_text(target, '{"run_id": "r", "again": true}')
    assert fs.read_text(target) == '{"run_id": "r", "again": true}'
    assert fs.list_names(f"file://{tmp_path}/_runs") == ["r.json"]  # the temporary file was renamed away


def test_local_paths_need_no_store():
    fs = FileSystem(None, "/tmp/anywhere")
    assert fs.usable and fs.kind == "local"
