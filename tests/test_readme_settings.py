"""README's configuration table says each setting's default: the same value Settings gives it
(the table once gave GEMMWATCH_MAX_AUTOTUNE_CASES twice, 128 and 256; the setting says 128)."""

import re

import pytest

from core.settings import Settings
from tests.conftest import ROOT

UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
ROW = re.compile(r"^\| (`[A-Z_]+`(?:, `[A-Z_]+`)*) \| ([^|]*) \|")


def table_defaults() -> list[tuple[str, str]]:
    """(variable, the default the README gives) for each row whose defaults pair up with its names;
    `_WINDOW` after `GEMMWATCH_REGRESSION_BOUNDARY` is GEMMWATCH_REGRESSION_WINDOW."""
    pairs = []
    for line in (ROOT / "README.md").read_text().splitlines():
        row = ROW.match(line)
        if not row:
            continue
        names = [n.strip(" `") for n in row.group(1).split(",")]
        prefix = names[0].rsplit("_", 1)[0]
        names = [prefix + n if n.startswith("_") else n for n in names]
        defaults = [d.strip(" `") for d in row.group(2).split(",")]
        if len(defaults) == len(names):
            pairs += zip(names, defaults)
    return pairs


def said(text: str):
    """A default as the README writes it: a number (with a unit of bytes), a word, or unset."""
    if text == "unset":
        return None
    if (sized := re.fullmatch(r"([0-9.]+) (KiB|MiB|GiB)", text)):
        return float(sized[1]) * UNITS[sized[2]]
    try:
        return float(text)
    except ValueError:
        return text.lower()


ALIASES = {f.validation_alias: f.default for f in Settings.model_fields.values() if isinstance(f.validation_alias, str)}


def test_the_table_is_read():
    names = [name for name, _ in table_defaults()]
    assert len(names) > 40 and "GEMMWATCH_MAX_CASES" in names and "GEMMWATCH_REGRESSION_WINDOW" in names
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]  # each variable once


@pytest.mark.parametrize("name, text", [p for p in table_defaults() if p[0] in ALIASES])
def test_each_default_the_readme_gives_is_the_settings(name, text):
    actual = ALIASES[name]
    if actual is None or actual == "":
        # Unset, or made at start (the data folder's database, a secret key): described in words.
        assert said(text) is None or isinstance(said(text), str), f"{name}: README says {text!r}, the default is unset"
        return
    expected = said(text)
    if isinstance(actual, bool):
        assert expected == str(actual).lower(), f"{name}: README says {text!r}, Settings {actual!r}"
    elif isinstance(actual, (int, float)):
        assert expected == pytest.approx(float(actual)), f"{name}: README says {text!r}, Settings {actual!r}"
    else:
        assert expected == str(actual).lower(), f"{name}: README says {text!r}, Settings {actual!r}"
