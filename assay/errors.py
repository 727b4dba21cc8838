"""The one error type a user ever sees: a clear line, a fix, exit code 2."""


class UserError(Exception):
    """Bad input or environment: the message names the problem and the fix.

    The CLI prints it as one line and exits 2; it never becomes a traceback.
    """

    exit_code = 2

    def __init__(self, problem: str, fix: str | None = None):
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem} (fix: {fix})" if fix else problem)
