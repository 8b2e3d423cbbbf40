"""The GRANT blocks of the docs, read by the least-privilege tests (the docs' list is the one the tests run with).

A block is a fenced ``sql`` block whose first line is its marker comment, then one ``GRANT ... TO {account};`` per
line; the statements come back without ``TO`` (the ``<grants><query>`` form of a users config), formatted with
``names`` (``{database}``, ``{table}``).
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[3] / "docs"


def documented_grants(page: str, marker: str, **names: str) -> list[str]:
    block = re.search(r"```sql\n" + re.escape(marker) + r"\n(.*?)```", (DOCS / page).read_text(), re.S)
    assert block is not None, f"{page} lists the grants in one sql block headed {marker!r}"
    grants = []
    for line in block.group(1).strip().splitlines():
        statement = re.fullmatch(r"(GRANT .+) TO \{account\};", line.strip())
        assert statement is not None, line
        grants.append(statement.group(1).format(**names))
    return grants
