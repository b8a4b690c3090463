"""An incremental run removes what no later run reads from its checkpoint, and nothing a later run needs: the
commit log's micro-batches before the published run's first (a rerun of it reads its own again), the offset-rule
and assignor states of runs before the previous one (a rerun of the last resumes from the one before)."""
from __future__ import annotations

from offsets_audit.incremental import ASSIGNOR_STATE_FOLDER, OFFSET_STATE_FOLDER, _drop_unneeded


def _folders(root, name):
    return sorted(p.name for p in (root / name).iterdir())


def test_published_run_drops_older_commit_log_batches_and_states(tmp_path):
    for batch in range(6):
        (tmp_path / "commit_log" / f"batch={batch}").mkdir(parents=True)
    for folder in (OFFSET_STATE_FOLDER, ASSIGNOR_STATE_FOLDER):
        for run_id in ("night-1", "night-2", "night-3", "killed-before-publishing"):
            (tmp_path / folder / f"run={run_id}").mkdir(parents=True)
    runs = [{"run_id": f"night-{i}", "records": [2 * (i - 1), 2 * i - 1]} for i in (1, 2, 3)]
    _drop_unneeded(str(tmp_path), runs, runs[-1]["records"][0])
    assert _folders(tmp_path, "commit_log") == ["batch=4", "batch=5"]
    for folder in (OFFSET_STATE_FOLDER, ASSIGNOR_STATE_FOLDER):
        assert _folders(tmp_path, folder) == ["run=night-2", "run=night-3"]


def test_first_run_of_a_checkpoint_drops_nothing(tmp_path):
    (tmp_path / "commit_log" / "batch=0").mkdir(parents=True)
    _drop_unneeded(str(tmp_path), [{"run_id": "night-1", "records": [0, 0]}], 0)
    assert _folders(tmp_path, "commit_log") == ["batch=0"]


def test_a_compacted_run_drops_older_fold_quarantine_and_count_batches_and_older_snapshots(tmp_path):
    for batch in range(6):
        for folder in ("commit_log", "fold_rows", "quarantine"):
            (tmp_path / folder / f"batch={batch}").mkdir(parents=True)
        (tmp_path / "counts").mkdir(exist_ok=True)
        (tmp_path / "counts" / f"batch={batch}.json").write_text("{}")
    for run_id in ("night-1", "night-2", "night-3", "killed-before-publishing"):
        (tmp_path / "compact" / f"run={run_id}").mkdir(parents=True)
    runs = [{"run_id": f"night-{i}", "records": [2 * (i - 1), 2 * i - 1], "fold": [2 * (i - 1), 2 * i - 1],
             "compact": True} for i in (1, 2, 3)]
    _drop_unneeded(str(tmp_path), runs, runs[-1]["records"][0], runs[-1]["fold"][0])
    for folder in ("commit_log", "fold_rows", "quarantine"):
        assert _folders(tmp_path, folder) == ["batch=4", "batch=5"], folder
    assert _folders(tmp_path, "counts") == ["batch=4.json", "batch=5.json"]
    assert _folders(tmp_path, "compact") == ["run=night-2", "run=night-3"]


def test_a_run_without_a_snapshot_keeps_every_fold_batch(tmp_path):
    for batch in range(4):
        (tmp_path / "fold_rows" / f"batch={batch}").mkdir(parents=True)
    runs = [{"run_id": "old", "records": [0, 1], "fold": [0, 1]}, {"run_id": "old-2", "records": [2, 3],
                                                                   "fold": [2, 3]}]
    _drop_unneeded(str(tmp_path), runs, 2, 2)
    assert _folders(tmp_path, "fold_rows") == ["batch=0", "batch=1", "batch=2", "batch=3"]
