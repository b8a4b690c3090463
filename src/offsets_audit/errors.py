"""Errors a person can act on.

A ``UserError`` is raised for mistakes a person makes (a wrong path, a bad option, a broken config key).
The CLI prints it as one line naming the fix, never as a stack trace. Bad *data* is never an exception:
it becomes a quarantine row (see ``offsets_audit.codec.DecodeError`` and the sources' quarantine rows).
A failure of the machine (a full disk, a read-only file system) or a damaged input file found only by Spark is
not a mistake either, but one line naming it and the fix too (``environment_failure``, ``unreadable_input``).
"""

import errno
import re


class UserError(Exception):
    """A mistake in how the tool was called or configured; the message says how to fix it."""

    def __init__(self, message: str, *, fix: str | None = None):
        self.fix = fix
        super().__init__(f"{message}; {fix}" if fix else message)


#: Failures of the machine, not of the run: (errno, what the JVM's and the OS's messages say, the fix).
_ENVIRONMENT = (
    (errno.ENOSPC, "No space left on device", "the disk is full",
     "free space there (the run removed what it had staged) or pass another --output / --checkpoint, and run again"),
    (errno.EDQUOT, "Disk quota exceeded", "the disk quota is exceeded",
     "free space there (the run removed what it had staged) or pass another --output / --checkpoint, and run again"),
    (errno.EROFS, "Read-only file system", "a folder the run writes is on a read-only file system",
     "pass an --output / --checkpoint on a writable file system"),
)


def environment_failure(exc: BaseException) -> str | None:
    """One line for a run stopped by its machine (a full disk, a quota, a read-only file system) in Python or in
    Spark's JVM, naming the path when the message has one; None for any other failure."""
    text = str(exc)
    for number, words, what, fix in _ENVIRONMENT:
        if (isinstance(exc, OSError) and exc.errno == number) or words in text:
            path = getattr(exc, "filename", None) if isinstance(exc, OSError) else None
            if path is None:
                found = re.search(r"(?:file:)?(/[^\s'\"():,]+)[^\n]*?" + re.escape(words), text)
                path = found.group(1) if found else None
            where = f" writing {path}" if path else ""
            return f"{what}{where} ({words}); {fix}"
    return None


#: How Spark names a file it failed to read (Spark 4 error class FAILED_READ_FILE, older wordings after it).
_FAILED_FILE = re.compile(r"(?:Encountered error while reading file|Could not read footer for file|"
                          r"is not a Parquet file|Error reading file)[:\s]*(?P<path>\S+)")


def unreadable_input(exc: BaseException) -> str | None:
    """One line for a Spark failure caused by a damaged input file (found only when Spark read its pages, after
    the footer checks passed), naming the file and the fix; None for any other failure."""
    text = str(exc)
    if "FAILED_READ_FILE" not in text and "Could not read footer" not in text and "ParquetDecodingException" not in text:
        return None
    match = _FAILED_FILE.search(text)
    where = "an input file"
    if match:
        where = match.group("path").rstrip(".,;:)")
        where = where[len("file://"):] if where.startswith("file://") else where.removeprefix("file:")
    return (f"Spark could not read {where}: its data is damaged although its footer is intact; move it out of "
            "the input folder (or write the dump again with `offsets-audit dump`) and run again")
