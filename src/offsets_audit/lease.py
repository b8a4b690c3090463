"""The run lease: one writer at a time per output folder and per incremental checkpoint.

Two runs writing the same output (or advancing the same checkpoint) at once would each replace the other's
tables, delete the other's staging folders as leftovers, or publish a checkpoint the other's tables do not
match. A run therefore holds a lease on every folder it writes, for its whole life: a second run meets it and
stops with one line naming the holder (run id, host, process id, since when), before it touches anything.

On a local (or mounted) file system the lease is an exclusive ``flock`` on ``<folder>/_lease.json``, which also
holds the holder's description. The kernel releases the lock when the holder's process ends, however it ends
(SIGKILL, a lost node's reboot), so a lease of a dead process is stale by construction: the next run takes it
over and says whose it was. Where ``flock`` is not available (some network or FUSE mounts) the file is created
exclusively instead, and a lease of a process that no longer runs on this host is recognised as stale by its
process id and start time.

Tables kept by name (``output.catalog``) are leased through their schema's own folder: the lease covers the
whole namespace, and a refusal names the namespace rather than the folder. A schema kept off this machine (a
remote metastore's or Unity Catalog's object-store location) gets no lease, as other non-local folders do not.

A process may take the same lease more than once (the command line takes it before Spark starts, the job again
around its work): it is counted and released with the last holder.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import socket
import sys
import threading
from dataclasses import dataclass
from typing import Iterator

from offsets_audit.errors import UserError

__all__ = ["LEASE_FILE", "Lease", "acquire", "check_writable", "holder", "leased", "release"]

LEASE_FILE = "_lease.json"


def _local(path: str) -> str | None:
    """The local path of ``path`` (a plain path or ``file://`` URI), None for other URIs."""
    if path.startswith("file://"):
        return path[len("file://"):]
    if path.startswith("file:"):
        return path[len("file:"):]
    return None if "://" in path else path


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from ``/proc``), None when unknown: a pid reused by
    another process after the holder died has another start time."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return fields[19]
    except (OSError, IndexError):
        return None


def _alive(info: dict) -> bool:
    """Whether the process that wrote ``info`` still runs (only answerable on its own host)."""
    if info.get("host") != socket.gethostname():
        return True  # another host's process: it cannot be seen from here
    pid = info.get("pid")
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    started = info.get("process_start")
    return started is None or _process_start(pid) in (None, started)


def describe(info: dict) -> str:
    """``run R (pid P on host H, since T)``."""
    return (f"run {info.get('run_id', '?')} (pid {info.get('pid', '?')} on host {info.get('host', '?')}, "
            f"since {info.get('since', '?')})")


@dataclass
class Lease:
    folder: str
    path: str
    run_id: str
    fd: int | None
    count: int = 1
    took_over: dict | None = None


_HELD: dict[str, Lease] = {}
_LOCK = threading.Lock()


def _read_info(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (FileNotFoundError, IsADirectoryError):
        return None
    except OSError:
        return {}
    try:
        info = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def holder(folder: str) -> dict | None:
    """The description of the run holding ``folder``'s lease, None when no live run holds it."""
    local = _local(folder)
    if local is None:
        return None
    path = os.path.join(local, LEASE_FILE)
    info = _read_info(path)
    if info is None:
        return None
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return info or None
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return info or {}
    except OSError:
        return info if info and _alive(info) else None
    finally:
        os.close(fd)
    return None


#: The command-line flag that names another place for each kind of leased folder.
_FLAGS = {"output": "--output", "checkpoint": "--checkpoint", "output catalog": "--output-catalog"}


def _refuse(shown: str, what: str, info: dict) -> UserError:
    return UserError(
        f"{what} {shown} is in use by {describe(info)}" if info else f"{what} {shown} is in use by another run",
        fix="wait for that run to end (two runs must not write one output or checkpoint at once), or pass another "
            + _FLAGS.get(what, "--output"))


def _info(run_id: str) -> dict:
    pid = os.getpid()
    return {"run_id": run_id, "host": socket.gethostname(), "pid": pid, "process_start": _process_start(pid),
            "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv[:2]))}


def _write_info(fd: int, info: dict) -> None:
    data = json.dumps(info, indent=2).encode("utf-8")
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)


def _acquire_flock(folder: str, path: str, run_id: str, what: str) -> Lease | None:
    """The lease by ``flock``; None when this file system has no ``flock``."""
    import fcntl

    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            info = _read_info(path) or {}
            os.close(fd)
            raise _refuse(folder, what, info) from None
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                return None
            raise
        # The file may have been removed by the holder releasing it between our open and our lock: then the
        # lock is on a file nobody else will open, and a new one must be taken.
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            continue
        stale = _read_info(path)
        info = _info(run_id)
        _write_info(fd, info)
        return Lease(folder, path, run_id, fd, took_over=stale or None)


def _acquire_exclusive(folder: str, path: str, run_id: str, what: str) -> Lease:
    """The lease as a file created exclusively (no ``flock`` here): a holder that no longer runs is stale."""
    took_over = None
    for _ in range(3):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            info = _read_info(path) or {}
            if info and _alive(info):
                raise _refuse(folder, what, info) from None
            took_over = info or None
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            continue
        _write_info(fd, _info(run_id))
        os.close(fd)
        return Lease(folder, path, run_id, None, took_over=took_over)
    raise _refuse(folder, what, _read_info(path) or {})


#: How deep ``check_writable`` looks under a folder, and at most how many folders it looks at.
WRITABLE_DEPTH = 3
WRITABLE_FOLDERS = 5000


def check_writable(local: str, folder: str, what: str) -> None:
    """A ``UserError`` before any work when the run could not write where it will: ``local`` (a folder the run
    writes) or a folder under it (a table, a run partition, a checkpoint's state) is read-only (permissions, or a
    read-only file system, which binds even root)."""
    seen = 0
    for current, dirs, _ in os.walk(local):
        depth = current[len(local):].count(os.sep)
        if not os.access(current, os.W_OK | os.X_OK):
            why = "is on a read-only file system" if _read_only_fs(current) else "is not writable by this user"
            shown = folder if current == local else f"{folder}: {current}"
            raise UserError(f"{what} {shown} {why}",
                            fix=f"pass a {what} folder this run can write, or make it writable")
        seen += 1
        if depth >= WRITABLE_DEPTH or seen >= WRITABLE_FOLDERS:
            dirs[:] = []


def _read_only_fs(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def acquire(folder: str, run_id: str, *, what: str = "output", label: str | None = None) -> Lease | None:
    """Take ``folder``'s lease for run ``run_id`` (creating the folder), or raise a ``UserError`` naming the run
    holding it. None for a folder that is not on a local or mounted file system (no lease is taken there).
    ``label`` is what the messages call the folder (the namespace whose tables it holds) instead of its path."""
    local = _local(folder)
    if local is None:
        return None
    key = os.path.realpath(local)
    with _LOCK:
        held = _HELD.get(key)
        if held is not None:
            held.count += 1
            return held
        try:
            os.makedirs(key, exist_ok=True)
        except OSError as exc:
            raise UserError(f"{what} {folder} cannot be created: {exc.strerror}",
                            fix=f"pass a {what} folder this user can write") from None
        check_writable(key, folder, what)
        path = os.path.join(key, LEASE_FILE)
        shown = label or folder
        try:
            lease = _acquire_flock(shown, path, run_id, what)
            if lease is None:
                lease = _acquire_exclusive(shown, path, run_id, what)
        except PermissionError:
            raise UserError(f"{what} {folder} is not writable by this user",
                            fix=f"pass a {what} folder you can write, or fix its permissions") from None
        except OSError as exc:
            raise UserError(f"{what} {folder}: cannot take its run lease: {exc.strerror or exc}",
                            fix=f"pass a {what} folder on a writable file system") from None
        if lease.took_over:
            print(f"[offsets-audit] {what} {shown}: taking over the lease of {describe(lease.took_over)}, "
                  "which ended without releasing it", file=sys.stderr, flush=True)
        _HELD[key] = lease
        return lease


def release(lease: Lease | None) -> None:
    """Give the lease back (the last of this process's holds removes the file and unlocks it)."""
    if lease is None:
        return
    with _LOCK:
        lease.count -= 1
        if lease.count > 0:
            return
        _HELD.pop(os.path.realpath(os.path.dirname(lease.path)), None)
        with contextlib.suppress(OSError):
            os.remove(lease.path)
        if lease.fd is not None:
            with contextlib.suppress(OSError):
                os.close(lease.fd)
            lease.fd = None


@contextlib.contextmanager
def leased(*folders: tuple[str, str], run_id: str) -> Iterator[list[Lease | None]]:
    """Hold the leases of ``folders`` (``(path, what)`` pairs, e.g. ``(output, "output")``) while the block runs."""
    taken: list[Lease | None] = []
    try:
        for folder, what in folders:
            taken.append(acquire(folder, run_id, what=what))
        yield taken
    finally:
        for lease in reversed(taken):
            release(lease)
