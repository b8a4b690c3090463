"""Errors a person can act on.

A ``UserError`` is raised for mistakes a person makes (a wrong path, a bad option, a broken config key).
The CLI prints it as one line naming the fix, never as a stack trace. Bad *data* is never an exception:
it becomes a quarantine row (see ``offsets_audit.codec.DecodeError`` and the sources' quarantine rows).
"""


class UserError(Exception):
    """A mistake in how the tool was called or configured; the message says how to fix it."""

    def __init__(self, message: str, *, fix: str | None = None):
        self.fix = fix
        super().__init__(f"{message}; {fix}" if fix else message)
