"""The exceptions every layer raises. This module imports nothing of ours, so any module (a weight
loader, a backend, a page) can raise them without an import pointing back up the data flow."""

from __future__ import annotations


class ModelError(ValueError):
    """A problem the user can fix (unknown name, bad folder, refused checkpoint, unreadable text):
    shown as one line, never as a traceback."""


class UnreadableText(ModelError):
    """A text the model cannot read at all (it reads another kind of input, such as single symbols):
    the page then shows one of the model's own examples and says why, rather than an error."""


class ServerBusy(ModelError):
    """A heavy computation refused because the server is already running as many as it allows:
    the same one line; trying again later works."""
