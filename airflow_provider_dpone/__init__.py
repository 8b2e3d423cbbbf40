"""Apache Airflow provider for fenced, exactly-once ClickHouse publication and ClickHouse -> SQL Server transfer.

The package is layered (see ``docs/architecture.md``): ``core`` what both routes share, ``cluster`` and ``transfer``
the two routes (values, ports, protocol, adapters inside each), and ``hooks``/``operators``/``triggers`` the thin
Airflow surface. Importing the package itself stays cheap: nothing here imports Airflow or a database client.

The docs pages ship inside the package (``airflow_provider_dpone/docs/<page>.md``, the ``docs/`` folder of the
repository): :func:`docs_page` finds one by the name every message cites (``see docs/<page>.md``).
"""

import re
from pathlib import Path

__version__ = "0.1.0"

_PAGE_NAME = re.compile(r"[a-z0-9][a-z0-9-]*(/[a-z0-9][a-z0-9-]*)?")
"""A docs page's name: a file stem of ``docs/`` or of one folder below it (``adr/...``), never a path out of it."""


def example_dags_folder() -> Path:
    """The folder of the example DAGs: inside the installed package, or the checkout's ``dags_examples/`` in an
    editable install (the value for ``[core] dags_folder``)."""
    package = Path(__file__).resolve().parent
    for folder in (package / "example_dags", package.parent / "dags_examples"):
        if folder.is_dir():
            return folder
    raise FileNotFoundError("no example DAGs next to the package")


def docs_page(name: str) -> Path:
    """The file of the docs page ``name`` (``connections``, ``docs/connections.md``, ``adr/<page>`` ...): inside the
    installed package, or the checkout's ``docs/`` in an editable install. Raises ``FileNotFoundError`` for an unknown
    page (``DPONE_DOCS_PAGE_UNKNOWN``), and for a name that is no page name (``DPONE_DOCS_PAGE_NAME_INVALID``: a path,
    ``..``, an absolute path, anything outside the docs), both ``DponeError``; nothing outside the docs is opened."""
    from airflow_provider_dpone.core.errors import DponeError

    stem = name.removeprefix("docs/").removesuffix(".md")
    if not _PAGE_NAME.fullmatch(stem):
        raise DponeError("DPONE_DOCS_PAGE_NAME_INVALID")
    package = Path(__file__).resolve().parent
    for folder in (package / "docs", package.parent / "docs"):
        page = folder / f"{stem}.md"
        if page.is_file():
            return page
    raise DponeError("DPONE_DOCS_PAGE_UNKNOWN", f"page {stem}")
