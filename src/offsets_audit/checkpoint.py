"""What an incremental checkpoint belongs to, and whether its pieces still agree.

A checkpoint (``run --incremental --checkpoint PATH``) is the state of one input read so far: the streaming
queries' offsets (which segment bytes, dump files or Kafka offsets were read), each group's fold and audit state,
and the runs published from it. Read with another input, or with pieces missing or altered, it gives a wrong
answer without any error: clusters merged, a whole log read again as new, findings reported twice, groups gone.
So:

* ``checkpoint.json`` records the input it belongs to (``source_identity``: the kind and the resolved location,
  or the bootstrap servers and topics of a live cluster). A run with another input stops with one line.
* Every published run's entry in ``runs.json`` lists the pieces (files) the next run, or a rerun of it, reads,
  with their sizes and checksums (``pieces``). A run checks them before any Spark work (``verify``): a piece
  missing, cut or changed stops it with one line saying how to rebuild. ``runs.json`` itself missing or unreadable
  while ``checkpoint.json`` says runs were published, and micro-batches Spark committed whose outputs are gone
  (``check_batches``), stop it the same way.

Spark's own streaming folders (``fold/``, ``records/``: offset and commit logs, the state store) are checked by
Spark, which keeps checksums of its files; a failure it reports is turned into the same one line
(``damaged_checkpoint``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import zlib
from pathlib import Path

from offsets_audit.errors import UserError

__all__ = ["CHECKPOINT_FILE", "RUNS_FILE", "check_batches", "claim", "damaged_checkpoint", "pieces", "published", "published_entry", "read_runs",
           "rebuild_fix", "resolved_source", "source_identity", "verify"]

CHECKPOINT_FILE = "checkpoint.json"
RUNS_FILE = "runs.json"
#: What a run's entry lists, by folder: state a later run resumes from (kept for the last two runs) and the
#: micro-batch outputs a rerun of the run reads again (kept for the last run).
STATE_FOLDERS = ("compact", "offset_rules", "assignor_state", "coordinator_costs", "coordinator_runs", "rebalances")
BATCH_FOLDERS = ("fold_rows", "counts", "quarantine", "commit_log")
#: Spark's streaming checkpoints of the two queries (checked by Spark itself).
STREAM_FOLDERS = ("fold", "records")
_CHUNK = 1 << 20


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def rebuild_fix(checkpoint: str) -> str:
    return (f"rebuild it: move {checkpoint} aside and pass a new --checkpoint (its first run reads the whole "
            "input again), or audit the whole input with a batch run (run without --incremental)")


def _damaged(checkpoint: str, what: str) -> UserError:
    return UserError(f"checkpoint {checkpoint} is damaged: {what}", fix=rebuild_fix(checkpoint))


def damaged_checkpoint(checkpoint: str, exc: BaseException) -> UserError | None:
    """The one line for a failure Spark raised while resuming from a damaged streaming checkpoint (its offset or
    commit log, its state store), None for any other failure."""
    text = str(exc)
    markers = ("ChecksumException", "Checksum error", "Incomplete log file", "CANNOT_LOAD_STATE_STORE",
               "STATE_STORE", "state store", "StateStore", "UNEXPECTED_FILE_SIZE", "Cannot read", "MalformedInput",
               "assertion failed", "Log file was malformed", "FileNotFoundException", "does not exist",
               "Unknown format", "Unsupported format", "CANNOT_READ_CHECKPOINT", "Corrupt", "corrupt",
               "JsonParseException", "MismatchedInputException", "NoSuchFileException", "EOFException",
               "Unable to find batch", "offset log", "commit log", "RocksDB", "zip")
    local = _local(checkpoint).rstrip("/")
    if local not in text and not any(f"/{folder}/" in text for folder in STREAM_FOLDERS):
        return None
    if not any(marker in text for marker in markers):
        return None
    found = re.search(re.escape(local) + r"/[^\s'\"\],;:)]+", text)
    where = found.group(0)[len(local) + 1:] if found else "Spark's streaming state"
    return _damaged(checkpoint, f"Spark could not resume its streaming state ({where})")


# -- what the checkpoint belongs to -------------------------------------------------------------------------------

def resolved_source(source: dict) -> dict:
    """``source`` (``sources.options.source_config``) with a local path made absolute and free of symbolic links,
    so that a run given the same input by another path (relative, absolute, through a link) reads it as the same
    input: the segments stream keys what it has read by file path."""
    path = source.get("path")
    if not path or ("://" in str(path) and not str(path).startswith("file://")):
        return source
    return {**source, "path": os.path.realpath(_local(str(path)))}


def source_identity(source: dict) -> dict:
    """What a checkpoint's input is: for files, the kind and the resolved location; for a live cluster, the
    bootstrap servers and what is read (topics or topic pattern, assigned partitions)."""
    kind = str(source.get("kind") or "").lower()
    if kind in ("segments", "parquet"):
        identity = {"kind": kind, "path": resolved_source(source)["path"]}
        for option in ("topic", "partition"):
            if source.get(option) is not None:
                identity[option] = str(source[option])
        return identity
    lowered = {str(k).lower(): v for k, v in source.items()}
    servers = sorted(s.strip() for s in str(lowered.get("kafka.bootstrap.servers") or "").split(",") if s.strip())
    identity = {"kind": kind, "bootstrap_servers": servers}
    for option in ("subscribe", "subscribepattern", "assign"):
        if lowered.get(option) is not None:
            identity[option] = str(lowered[option])
    if not any(option in identity for option in ("subscribe", "subscribepattern", "assign")):
        identity["subscribe"] = "__consumer_offsets"
    return identity


def _same_input(recorded: dict, current: dict) -> bool:
    if recorded.get("kind") != current.get("kind"):
        return False
    if current.get("kind") == "kafka":
        # The same cluster may be reached through other brokers of it: one broker in common is enough.
        shared = set(recorded.get("bootstrap_servers") or []) & set(current.get("bootstrap_servers") or [])
        others = {k: v for k, v in recorded.items() if k not in ("kind", "bootstrap_servers")}
        return bool(shared) and others == {k: v for k, v in current.items() if k not in ("kind", "bootstrap_servers")}
    return recorded == current


def _show(identity: dict) -> str:
    if identity.get("kind") == "kafka":
        topics = identity.get("subscribe") or identity.get("subscribepattern") or identity.get("assign")
        return f"kafka {','.join(identity.get('bootstrap_servers') or [])} ({topics})"
    extra = "".join(f", {k} {v}" for k, v in identity.items() if k not in ("kind", "path"))
    return f"{identity.get('kind')} {identity.get('path')}{extra}"


def _read_json(path: Path, checkpoint: str, default):
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return default
    except (OSError, UnicodeDecodeError) as exc:
        raise _damaged(checkpoint, f"{path.name} cannot be read ({exc.__class__.__name__})") from None
    try:
        return json.loads(text)
    except ValueError:
        raise _damaged(checkpoint, f"{path.name} is not valid JSON (cut or altered)") from None


def _write_json(path: Path, data) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data, sort_keys=True, indent=1))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def read_runs(checkpoint: str) -> list[dict]:
    """The published runs of ``runs.json`` (empty before the first), or a ``UserError`` when it is unreadable,
    malformed, or missing although ``checkpoint.json`` says runs were published."""
    root = Path(_local(checkpoint))
    runs = _read_json(root / RUNS_FILE, checkpoint, None)
    meta = _read_json(root / CHECKPOINT_FILE, checkpoint, None)
    published = int((meta or {}).get("published") or 0) if isinstance(meta, dict) else 0
    if runs is None:
        if published:
            raise _damaged(checkpoint, f"{RUNS_FILE} is missing but {CHECKPOINT_FILE} says {published} run(s) "
                                       "were published from it")
        return []
    if not isinstance(runs, list) or not all(isinstance(r, dict) and isinstance(r.get("run_id"), str)
                                             and isinstance(r.get("fold"), list) and isinstance(r.get("records"), list)
                                             for r in runs):
        raise _damaged(checkpoint, f"{RUNS_FILE} does not list runs as this version writes them")
    if len(runs) < published:
        raise _damaged(checkpoint, f"{RUNS_FILE} lists {len(runs)} run(s) but {CHECKPOINT_FILE} says {published} "
                                   "were published (an older copy of it?)")
    return runs


def claim(checkpoint: str, source: dict, runs: list[dict]) -> dict:
    """Record the input ``checkpoint`` belongs to on its first run, or check that ``source`` is that input: a
    ``UserError`` when it is another one, or when the checkpoint holds streaming state but no record of its input
    (damaged). Returns the identity."""
    root = Path(_local(checkpoint))
    identity = source_identity(source)
    meta = _read_json(root / CHECKPOINT_FILE, checkpoint, None)
    if meta is not None and not (isinstance(meta, dict) and isinstance(meta.get("source"), dict)):
        raise _damaged(checkpoint, f"{CHECKPOINT_FILE} does not say which input the checkpoint belongs to")
    recorded = meta["source"] if meta else next((r["source"] for r in reversed(runs) if r.get("source")), None)
    if recorded is None:
        streaming = [f for f in STREAM_FOLDERS if (root / f).exists()]
        if streaming and not runs:
            raise _damaged(checkpoint, f"it holds streaming state ({', '.join(f + '/' for f in streaming)}) but no "
                                       f"{CHECKPOINT_FILE} saying which input it belongs to")
        # A new checkpoint, or one whose runs predate the record: from now on it belongs to this input.
        meta = {"source": identity, "published": len(runs),
                "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        root.mkdir(parents=True, exist_ok=True)
        _write_json(root / CHECKPOINT_FILE, meta)
        return identity
    if not _same_input(recorded, identity):
        raise UserError(f"checkpoint {checkpoint} belongs to input {_show(recorded)}, not to {_show(identity)}",
                        fix="pass the checkpoint of this input, or a new --checkpoint for it (a checkpoint holds "
                            "what one input has been read up to)")
    if meta is None:
        _write_json(root / CHECKPOINT_FILE, {"source": recorded, "published": len(runs)})
    return recorded


def published(checkpoint: str, count: int) -> None:
    """Record that ``count`` runs are published (after ``runs.json`` is written): a ``runs.json`` that later goes
    missing or loses runs is then seen as damage, not as a new checkpoint."""
    root = Path(_local(checkpoint))
    meta = _read_json(root / CHECKPOINT_FILE, checkpoint, None) or {}
    _write_json(root / CHECKPOINT_FILE, {**meta, "published": count})


# -- the pieces a published run leaves for the next --------------------------------------------------------------

def _checksum(path: Path) -> str:
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return f"{crc:08x}"


def _files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return [folder] if folder.is_file() else []
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".crc"))


def _batch_paths(root: Path, folder: str, batches: range) -> list[Path]:
    out = []
    for batch in batches:
        out.extend(_files(root / folder / f"batch={batch}"))
        out.extend(_files(root / folder / f"batch={batch}.json"))
    return out


def pieces(checkpoint: str, entry: dict) -> dict:
    """``{"state": {path: [size, crc32]}, "batches": {...}}`` of what a later run reads after ``entry`` (a run
    about to be published): its compact snapshot chain, offset-rule and assignor states and the rebalances it
    stored (state), and the outputs of its micro-batches, which a rerun of it reads again (batches). Paths are
    relative to the checkpoint."""
    root = Path(_local(checkpoint))
    state: list[Path] = []
    for run in entry.get("chain") or []:
        state += _files(root / "compact" / f"run={run}")
    for folder in ("offset_rules", "assignor_state", "coordinator_costs", "coordinator_runs", "rebalances"):
        state += _files(root / folder / f"run={entry['run_id']}")
    fold = range(entry["fold"][0], entry["fold"][1] + 1)
    records = range(entry["records"][0], entry["records"][1] + 1)
    batches = _batch_paths(root, "fold_rows", fold)
    for folder in ("counts", "quarantine", "commit_log"):
        batches += _batch_paths(root, folder, records)

    def listed(paths):
        return {str(p.relative_to(root)): [p.stat().st_size, _checksum(p)] for p in paths}

    return {"state": listed(state), "batches": listed(batches)}


def published_entry(runs: list[dict], entry: dict) -> list[dict]:
    """``runs`` with ``entry`` appended, the older entries' pieces cut to what later runs still read of them:
    the last two runs' whole lists (a rerun of the last resumes from the one before), and of older runs only the
    rebalances they stored (read by day for ``latency_daily``). ``runs.json`` stays O(runs)."""
    out = []
    for run in runs[:-1]:
        kept = dict(run)
        if "pieces" in kept:
            kept["pieces"] = {"state": {p: v for p, v in kept["pieces"]["state"].items()
                                        if p.startswith("rebalances/")}, "batches": {}}
        out.append(kept)
    return out + runs[-1:] + [entry]


def verify(checkpoint: str, runs: list[dict], rerun: bool) -> None:
    """Check, before any Spark work, that what this run reads of the published runs (``runs``, the last included
    also for a ``rerun`` of it) is as they left it: the state pieces of the run it resumes from (the last
    published run, or the one before it for a rerun) and, for a rerun, the last run's micro-batch outputs, by
    size and checksum; the rebalances every earlier run stored, by size. A ``UserError`` names the first piece
    that is missing, cut or changed."""
    root = Path(_local(checkpoint))
    resumed = runs[:-1] if rerun else runs
    expected: dict = {}
    sized: dict = {}
    for run in resumed[:-1]:
        sized.update(((run.get("pieces") or {}).get("state")) or {})
    if resumed:
        expected.update(((resumed[-1].get("pieces") or {}).get("state")) or {})
    if rerun:
        expected.update(((runs[-1].get("pieces") or {}).get("batches")) or {})
    for relative, (size, crc) in sorted({**sized, **expected}.items()):
        path = root / relative
        try:
            actual = path.stat().st_size
        except FileNotFoundError:
            raise _damaged(checkpoint, f"{relative} is missing") from None
        if actual != size:
            raise _damaged(checkpoint, f"{relative} has {actual} bytes, {size} when its run was published")
        if relative in expected and _checksum(path) != crc:
            raise _damaged(checkpoint, f"{relative} was altered since its run was published (checksum)")


def _committed(root: Path, query: str) -> list[int]:
    folder = root / query / "commits"
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def check_batches(checkpoint: str, first_fold: int, first_records: int, fold_done: list[int],
                  records_done: list[int]) -> None:
    """After the streaming queries: every micro-batch Spark committed from ``first_fold`` / ``first_records`` on
    (those this run reads) has its outputs (``fold_done``, ``records_done``: the batches whose outputs are
    complete). Spark writes a batch's commit after its outputs, so a committed batch without them was damaged."""
    root = Path(_local(checkpoint))
    for query, first, done, outputs in (("fold", first_fold, fold_done, "fold_rows"),
                                        ("records", first_records, records_done, "counts")):
        missing = sorted(set(b for b in _committed(root, query) if b >= first) - set(done))
        if missing:
            raise _damaged(checkpoint, f"micro-batch {missing[0]} of the {query} query is committed but its "
                                       f"outputs ({outputs}/batch={missing[0]}) are missing or incomplete")
