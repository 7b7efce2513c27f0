"""Text for a rich console whose own brackets are kept: a message that quotes a pattern
('^[a-z][a-z0-9_]{0,59}$'), a list or a path must not be read as markup and lose them."""

from rich.markup import escape

__all__ = ["colored", "escape"]


def colored(style: str, text: str) -> str:
    """`text` in a rich style ("red", "yellow"), printed as written."""
    return f"[{style}]{escape(text)}[/{style}]"
