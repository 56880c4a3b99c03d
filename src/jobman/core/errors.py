"""One exception root; the CLI turns each into a one-line message and an exit code."""


class JobmanError(Exception):
    """Root of jobman's expected failures. str(e) is the one line shown to the user."""

    exit_code = 1


class BadInput(JobmanError):
    """The user asked for something invalid; nothing was changed."""

    exit_code = 2


class NotFound(BadInput):
    """A selector matched no job (or several)."""


class Conflict(JobmanError):
    """A guarded write found the row changed (phase or revision moved on): reload and decide again."""


class LaunchError(JobmanError):
    """The supervisor could not be started or did not claim the job."""
