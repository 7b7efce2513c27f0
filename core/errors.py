"""Errors the domain raises about a request's content; the API answers each with a 422 that
names the field (api/app.py), the CLI prints it."""


class Unprocessable(ValueError):
    """The request names something that cannot be done: `field` is where, `message` why."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
