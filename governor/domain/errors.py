"""What can go wrong in a use case, in words the API maps to status codes.

GovernorError
  NotFound        the thing named does not exist (404)
  Conflict        the request clashes with the current state, e.g. deciding twice (409)
    RunEnded      a job acts for its run after the run ended: the job should stop
  Forbidden       the caller is known but may not do this (403)
  Unauthenticated no valid token (401)
  Invalid         well-formed input that is still wrong, e.g. an unknown provider (422)
  Unavailable     what the use case needs did not answer (a provider): try again (503)
  NotLeader       this replica's term is over: its periodic work stops until it leads again
"""


class GovernorError(Exception):
    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(GovernorError):
    code = "not_found"


class Conflict(GovernorError):
    code = "conflict"


class Forbidden(GovernorError):
    code = "forbidden"


class Unauthenticated(GovernorError):
    code = "unauthenticated"


class Invalid(GovernorError):
    code = "invalid"


class RunEnded(Conflict):
    """A job's token acts for a run that has ended: its job should stop (409)."""

    code = "run_ended"


class Unavailable(GovernorError):
    """What the use case needs could not be asked right now (a provider); the caller may try
    again (503)."""

    code = "unavailable"


class NotLeader(GovernorError):
    """This replica's term is over: another replica leads, or the lease ran out."""

    code = "not_leader"
