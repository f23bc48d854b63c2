"""`bugmatrix`'s exit codes, in one place (as pytest's `ExitCode`): every command, the nightly's steps and the
docs spell them through this enum."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """What a `bugmatrix` process's exit status means."""

    OK = 0  # every observed outcome as expected; a check that found nothing; a command that did what it was asked
    FAILED = 1  # an outcome not the expected one, a regression, a refusal, a check that found a difference
    USAGE_ERROR = 2  # input that cannot be read or carried out: one line naming the file, field or argument
    DISK_FULL = 3  # the results store could not be written for want of space: one line naming it and the free space
    NOTHING_RAN = 5  # pytest's code when no test ran: a selection that matches nothing, nothing measured
    INTERRUPTED = 130  # Ctrl-C, SIGTERM or SIGHUP: launches in flight were killed
