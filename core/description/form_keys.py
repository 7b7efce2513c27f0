"""A GEMM form's key (core/description/gemm_form.py GemmForm.key) as the wire and the URLs take it.

Results, posted results, the API's filters and the dashboard's `form` parameter all name a form by
its key ("rrr", "rcr+ab+acc16", "ccc+batch32"). Only the grammar is checked here, so a posted
result or a URL names a form the key could have made; what each key means is gemm_form's.
"""

import re
from typing import Annotated

from pydantic import StringConstraints

from core.description.gemm_form import DEFAULT_KEY, label

# Layouts of A, B, C; then, each where it is not the default and in this order: the epilogue, FP16
# accumulate, a batch of 2 to 999,999 (GemmForm.key leaves a batch of 1 out, so "+batch1" is no key).
PATTERN = r"^[rc]{3}(\+ab|\+alpha)?(\+acc16)?(\+batch([2-9]|[1-9][0-9]{1,5}))?$"
MAX_LENGTH = 40  # the column's width (core/records/models.py Result.form)
FormKey = Annotated[str, StringConstraints(pattern=PATTERN, max_length=MAX_LENGTH)]
_KEY = re.compile(PATTERN)

__all__ = ["DEFAULT_KEY", "FormKey", "PATTERN", "batch_of", "is_key", "label"]


def is_key(text: str) -> bool:
    return bool(_KEY.match(text))


def batch_of(key: str) -> int:
    """The matrices per call a key names (1 where it names none)."""
    match = _KEY.match(key)
    return int(match.group(4)) if match and match.group(4) else 1
