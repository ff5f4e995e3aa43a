"""The errors a user can mend: each carries its one-line reason.

    raise SettingsError(".mrtr-inspect.toml: severity: unknown rule id 'x'")

The command line catches `UserError` once (cli.py) and prints its text as one line on stderr,
`mrtr-inspect: <reason>`, then exits 2 (CONTRACTS.md). Every error of that kind derives from it:
`settings.SettingsError`, `recording.writer.RecordingError`, `recording.reader.UnreadableRecording`,
`recording.files.CannotWrite`, `replay.script.ReplayError` (and its `ScriptError`, `VerifyError`),
`adapters.flows.ImportFailed`, `outputs.exporters.ExportError`.
"""

from __future__ import annotations


class UserError(Exception):
    """A one-line reason for the user (no traceback): a file that cannot be read or written, a
    setting that cannot be used, a recording that cannot be played."""
