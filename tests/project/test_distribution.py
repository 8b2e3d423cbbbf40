"""What a user installs from this repository: the wheel ``make dist`` builds carries the example DAGs and the docs
pages every message cites, and an installed copy finds each page by its name.

The wheel is built from this checkout with ``uv build`` (as ``make dist`` does) and unpacked into a plain target
directory (``--no-deps``: the dependencies are the ones this environment already has), so the checks run against
the installed files, not the checkout.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from airflow_provider_dpone import docs_page
from airflow_provider_dpone.cli import main
from airflow_provider_dpone.core.errors import REGISTRY
from airflow_provider_dpone.provider_info import get_provider_info

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"
"""``make install`` puts uv into the virtual environment (``make dist`` builds with it)."""
PAGE = re.compile(r"docs/([a-z0-9-]+)\.md")


def _cited_pages() -> set[str]:
    """Every docs page an error message, a DAG docstring or a module of the package names (``docs/<page>.md``)."""
    texts = [f"{code.cause} {code.action}" for code in REGISTRY.values()]
    for folder in (REPO / "airflow_provider_dpone", REPO / "dags_examples"):
        texts += [path.read_text(encoding="utf-8") for path in folder.rglob("*.py")]
    return {match for text in texts for match in PAGE.findall(text)}


def test_every_cited_docs_page_exists_and_the_documentation_link_names_one() -> None:
    cited = _cited_pages()
    assert {"connections", "getting-started", "manifest-reference", "targets"} <= cited
    missing = sorted(page for page in cited if not (REPO / "docs" / f"{page}.md").is_file())
    assert missing == [], f"messages cite docs pages that do not exist: {missing}"
    url = get_provider_info()["documentation-url"]
    assert url == docs_page("getting-started").as_uri() and Path(url.removeprefix("file://")).is_file()


def test_dpone_docs_prints_a_page_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["docs", "docs/connections.md"]) == 0
    assert Path(capsys.readouterr().out.strip()) == REPO / "docs" / "connections.md"
    assert main(["docs", "no-such-page"]) == 2
    refused = capsys.readouterr()
    assert refused.out == ""
    assert [error["code"] for error in json.loads(refused.err)["errors"]] == ["DPONE_DOCS_PAGE_UNKNOWN"]


@pytest.mark.parametrize(
    "path",
    ["../README.md", "docs/../../pyproject.toml", "../pyproject", "/etc/hostname", "adr/../../README", "docs/./index"],
)
def test_dpone_docs_names_pages_only_never_a_path_out_of_the_docs(
    path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``dpone docs`` prints a page by its name; a path (``..``, absolute, ``.``) is no page name and is refused with
    its code, even where the file it would reach exists, and the refusal does not echo the path."""
    assert main(["docs", path]) == 2
    refused = capsys.readouterr()
    assert refused.out == ""
    assert [error["code"] for error in json.loads(refused.err)["errors"]] == ["DPONE_DOCS_PAGE_NAME_INVALID"]
    assert path not in refused.err


def test_dpone_example_dags_prints_the_folder_of_the_example_dags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example-dags"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert folder == REPO / "dags_examples" and (folder / "clickhouse_external_full_refresh.py").is_file()


def test_the_built_wheel_installs_the_examples_and_the_docs_pages(tmp_path: Path) -> None:
    subprocess.run([str(UV), "build", "--quiet", "--wheel", "--out-dir", str(tmp_path / "dist")], cwd=REPO, check=True)
    (wheel,) = (tmp_path / "dist").glob("airflow_provider_dpone-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    examples = {f"airflow_provider_dpone/example_dags/{path.name}" for path in (REPO / "dags_examples").glob("*.py")}
    assert examples <= names and "airflow_provider_dpone/example_dags/transfer_demo.py" in names
    doubles = sorted(n for n in names if n.endswith(".py") and "embedded" in n)
    assert doubles == [], f"the test double ships apart (packages/dpone-embedded), not in the provider: {doubles}"
    pages = {f"airflow_provider_dpone/docs/{page}.md" for page in _cited_pages() | {"index"}}
    assert pages <= names, sorted(pages - names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "pypi.org/project/airflow-provider-dpone" not in metadata, "no link to an index page that does not exist"
    postgres = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "'postgres'" in line]
    assert any(line.startswith("Requires-Dist: apache-airflow-providers-postgres") for line in postgres), (
        "the postgres extra installs the Postgres provider (its connection type is what the UI's form offers)"
    )

    site = tmp_path / "site"
    subprocess.run(
        [str(UV), "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        env={"PATH": str(UV.parent) + ":/usr/bin:/bin", "UV_PYTHON": sys.executable},
    )
    shutil.rmtree(tmp_path / "dist")
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "import airflow_provider_dpone as p; print(p.docs_page('connections'), p.example_dags_folder())",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    page, examples = (Path(path) for path in found.stdout.split())
    assert page == site / "airflow_provider_dpone" / "docs" / "connections.md"
    assert examples == site / "airflow_provider_dpone" / "example_dags"


def test_make_dist_installs_nothing_into_the_users_virtual_environment(tmp_path: Path) -> None:
    """``make dist`` (every prerequisite forced, dry run) neither installs into the project's venv nor the active one:
    it builds from a throwaway tool environment, each distribution in uv's isolated build environment."""
    user_venv = tmp_path / "users-venv"
    planned = subprocess.run(
        ["make", "-n", "-B", "dist", f"VENV={user_venv}"],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "VIRTUAL_ENV": str(user_venv)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "uv build" in planned
    assert str(user_venv) not in planned, planned
    assert "pip install --quiet -e" not in planned and "[dev]" not in planned, planned


def test_the_documentation_link_opens_a_page_the_providers_plugin_serves(tmp_path: Path) -> None:
    """Airflow 3.3's Admin > Providers links the wheel's ``Project-URL: Documentation``; the provider's plugin serves
    that path in the API server, with the page's links rewritten to pages it serves too."""
    from fastapi.testclient import TestClient

    from airflow_provider_dpone.docs_plugin import DOCUMENTATION_PATH, URL_PREFIX, DponeDocsPlugin, app

    subprocess.run([str(UV), "build", "--quiet", "--wheel", "--out-dir", str(tmp_path)], cwd=REPO, check=True)
    (wheel,) = tmp_path.glob("airflow_provider_dpone-*.whl")
    archive = zipfile.ZipFile(wheel)
    metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    entry_points = archive.read(next(n for n in archive.namelist() if n.endswith("entry_points.txt"))).decode()
    (link,) = [line.split(",", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Project-URL: ")]
    assert link == DOCUMENTATION_PATH and link.startswith(URL_PREFIX + "/")
    assert "[airflow.plugins]" in entry_points and "airflow_provider_dpone.docs_plugin:DponeDocsPlugin" in entry_points
    assert DponeDocsPlugin.fastapi_apps == [{"app": app, "url_prefix": URL_PREFIX, "name": "dpone docs"}]

    client = TestClient(app)
    opened = client.get(link.removeprefix(URL_PREFIX))
    assert opened.status_code == 200 and "<h1>" in opened.text and "Getting started" in opened.text
    assert 'href="connections"' in opened.text or 'href="connections#' in opened.text, "page links are served"
    linked = client.get("/docs/connections")
    assert linked.status_code == 200 and "SQLExecuteQueryOperator" in linked.text
    refusals = {
        "no-such-page": "DPONE_DOCS_PAGE_UNKNOWN",
        "..%2F..%2Fpyproject.toml": "DPONE_DOCS_PAGE_NAME_INVALID",
        "..%2F..%2FREADME": "DPONE_DOCS_PAGE_NAME_INVALID",
        "%2Fetc%2Fhostname": "DPONE_DOCS_PAGE_NAME_INVALID",
        "adr%2F..%2F..%2F..%2Fpyproject": "DPONE_DOCS_PAGE_NAME_INVALID",
        "..%252F..%252Fpyproject": "DPONE_DOCS_PAGE_NAME_INVALID",
    }
    for name, code in refusals.items():
        refused = client.get(f"/docs/{name}")
        assert (refused.status_code, refused.json()) == (404, {"detail": code}), name
    # a client that does not normalise the path sends the dot segments as they are: still no page name
    raw = client.get("/docs/adr/../../../README", follow_redirects=False)
    assert raw.status_code == 404, raw.text[:200]
