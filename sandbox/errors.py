"""The one error of running submitted generator code."""


class SandboxError(Exception):
    """The generator broke a rule or the API; `code` names how, `detail` holds its traceback."""

    def __init__(self, code: str, message: str, detail: str = ""):
        self.code = code
        self.message = message
        self.detail = detail
        super().__init__(f"{code}: {message}")
