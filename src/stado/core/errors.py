"""One exception root for stado's expected failures; the CLI turns each into one line and an exit code.

Object-store failures keep their own root (stado.objectstore.base.StoreError); the CLI translates
both. str(e) is the line shown to the user: it names the problem and, where it can, what to do.
"""


class StadoError(Exception):
    """Root of stado's expected failures."""

    exit_code = 1


class BadInput(StadoError):
    """The user asked for something invalid; nothing was written."""

    exit_code = 2


class JobNotFound(StadoError):
    """No job has that id or name."""

    exit_code = 3


class CorruptDocument(StadoError):
    """A stored document is not valid JSON or lacks the fields every stado document carries."""

    def __init__(self, key: str, reason: str):
        super().__init__(f"{key}: corrupt document ({reason})")
        self.key, self.reason = key, reason


class Conflict(StadoError):
    """A conditional write kept losing to other writers; nothing was decided. Try again."""


class ArtifactError(StadoError):
    """An artifact could not be staged, uploaded or delivered."""

    exit_code = 5


class UnsafeArtifactName(ArtifactError):
    """An artifact name would escape its directory ('..', '/', NUL, ...)."""


class ChecksumMismatch(ArtifactError):
    """Downloaded bytes do not match the manifest's size or SHA-256."""


class TransferStalled(StadoError):
    """A transfer moved no bytes for the stall window (STADO_CONFIG stall_timeout, when set) and was ended.
    What it fetched is kept, so the next attempt resumes there."""

    exit_code = 4


class NotFinished(StadoError):
    """`stado results` of a job that has not finished: it has no results yet."""

    exit_code = 6


# 0-6 are taken; the commands that pass a job's own status through (wait, job watch, logs --follow) never raise this.
EXIT_UNKNOWN = 7


class NotWritten(StadoError):
    """A command that writes could not reach the store, and knows that nothing it meant to write landed."""

    exit_code = 4


class NotSubmitted(NotWritten):
    """The store's answers (or a request that never left this host) show that no job was queued; the message says
    which jobs of a batch were, if any."""


class OutcomeUnknown(StadoError):
    """A write whose answer was lost, and whose effect could not be read back before the bound: it may have landed
    or not. The message names the job and how to find out (`stado status ID`); `job_id` is the job (the CLI prints
    it on stdout, as it prints an id that landed)."""

    exit_code = EXIT_UNKNOWN

    def __init__(self, message: str, job_id: str | None = None):
        super().__init__(message)
        self.job_id = job_id
