"""The shipped docs pages, served inside the Airflow API server by the provider's plugin.

``GET /dpone/docs/<page>`` answers the page :func:`docs_page` finds by name (``getting-started``, ``connections``,
``adr/...``) as HTML, its links between pages rewritten to this route; any other name (a path, ``..``, an unknown
page) is 404 with the code of the refusal (``DPONE_DOCS_PAGE_NAME_INVALID``, ``DPONE_DOCS_PAGE_UNKNOWN``). The wheel's ``Project-URL: Documentation`` is :data:`DOCUMENTATION_PATH`, the link Airflow's Admin >
Providers shows, so it opens on the server the user is looking at. The pages are the ones in the package (no index
hosts them); they carry no secret and need no login.
"""

from __future__ import annotations

import html
import re
from typing import Final

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse
from markdown_it import MarkdownIt

from airflow_provider_dpone import docs_page
from airflow_provider_dpone.core.errors import DponeError

URL_PREFIX: Final[str] = "/dpone"
DOCUMENTATION_PATH: Final[str] = f"{URL_PREFIX}/docs/getting-started"
"""The documentation link (pyproject's ``[project.urls] Documentation``, a test holds them equal)."""

_PAGE_LINK: Final[re.Pattern[str]] = re.compile(r'href="(?![a-z]+:|/|#)([^"#]*?)\.md(#[^"]*)?"')
"""A relative link to another page (``connections.md#anchor``, ``../errors.md``): served without ``.md``."""

_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")

app = FastAPI(title="dpone docs", docs_url=None, redoc_url=None, openapi_url=None)


def render_page(text: str, name: str) -> str:
    """One page as a standalone HTML document, its page links pointing at this route."""
    body = _PAGE_LINK.sub(lambda match: f'href="{match.group(1)}{match.group(2) or ""}"', _MARKDOWN.render(text))
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>dpone: {html.escape(name)}</title></head>'
        f"<body>{body}</body></html>"
    )


@app.get("/docs/{name:path}", response_class=HTMLResponse)
def page(name: str) -> HTMLResponse:
    try:
        found = docs_page(name)
    except DponeError as exc:
        raise HTTPException(status_code=404, detail=exc.code) from None
    return HTMLResponse(render_page(found.read_text(encoding="utf-8"), name))


class DponeDocsPlugin(AirflowPlugin):
    """Serves the provider's docs pages at ``/dpone/docs/<page>`` in the API server."""

    name = "dpone_docs"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "dpone docs"}]  # noqa: RUF012 -- AirflowPlugin API
