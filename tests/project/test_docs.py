"""The documentation cannot drift: generated sections are current, links resolve, examples run as documented."""

from __future__ import annotations

import io
import json
import re
import tomllib
from pathlib import Path

import pytest

from airflow_provider_dpone.admission import admit_static
from airflow_provider_dpone.cli import EXIT_CODES, run
from airflow_provider_dpone.core.errors import REGISTRY
from airflow_provider_dpone.core.errors.code import registered_name
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest, NativeTransferManifest, parse_manifest
from airflow_provider_dpone.docs_gen import REGENERATE, SECTIONS, field_rows, regenerate, stale_pages
from tests.support.manifest_samples import EXAMPLES, REPO

pytestmark = pytest.mark.unit

DOCS = REPO / "docs"
PAGES = sorted([*DOCS.glob("*.md"), REPO / "README.md"])


def test_generated_sections_are_current() -> None:
    diffs = stale_pages(DOCS)
    assert not diffs, "".join(diffs.values()) + f"\nstale generated docs; fix with: .venv/bin/{REGENERATE}"


def test_every_registered_code_is_documented_with_retryability_cause_and_action() -> None:
    text = (DOCS / "errors.md").read_text(encoding="utf-8")
    for entry in REGISTRY.values():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{entry.code}` |")), None)
        assert row is not None, f"{entry.code} missing from docs/errors.md; run {REGENERATE}"
        assert entry.cause.replace("|", "\\|") in row and entry.action.replace("|", "\\|") in row
        assert row.startswith(f"| `{entry.code}` | {'yes' if entry.retryable else 'no'} | ")


def test_exit_codes_are_documented() -> None:
    text = (DOCS / "errors.md").read_text(encoding="utf-8") + (DOCS / "getting-started.md").read_text(encoding="utf-8")
    for code, _ in EXIT_CODES:
        assert f"`{code}`" in text


def test_regenerate_requires_markers() -> None:
    with pytest.raises(ValueError, match="markers"):
        regenerate("no markers here", {"x": lambda: "y"})


def test_every_manifest_field_is_documented() -> None:
    reference = (DOCS / "manifest-reference.md").read_text(encoding="utf-8")
    for model in (ClusterPublicationManifest, NativeTransferManifest):
        for path, _type, _default, meaning in field_rows(model):
            assert meaning.strip()
            assert path.split(" ")[0] in reference


def test_generated_pages_are_known() -> None:
    assert set(SECTIONS) <= {page.name for page in PAGES}


_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    for target, _anchor in _LINK.findall(page.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        assert (page.parent / target).resolve().exists(), f"{page.name}: broken link {target}"


def test_readme_has_exactly_two_setup_commands() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    assert len(blocks) == 1
    commands = [line.split("#")[0].strip() for line in blocks[0].splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def _yaml_blocks(page: Path) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_documented_manifests_are_admissible(page: Path) -> None:
    for block in _yaml_blocks(page):
        if block.startswith("version: 1"):
            assert admit_static(parse_manifest(block)).admissible


def test_getting_started_shows_the_real_check_output() -> None:
    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    documented = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.DOTALL)]
    for example in ("clickhouse_external_full_refresh.yaml", "clickhouse_to_mssql_raw_snapshot.yaml"):
        out, err = io.StringIO(), io.StringIO()
        assert run("check", str(EXAMPLES / example), out, err) == 0
        assert json.loads(out.getvalue()) in documented


def test_architecture_names_every_layer_of_the_import_contract() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    layers = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    for layer in layers:
        for module in layer.split("|"):
            assert f"`{module.strip()}`" in text


def test_the_runbook_describes_an_abort_as_the_code_runs_it() -> None:
    """Fence first, then exact-UUID drops member by member (no ON CLUSTER drop, in either mode), then ABORTED."""
    runbook = (DOCS / "runbook.md").read_text()
    section = runbook.split("## Aborting an operation before publication", 1)[1].split("\n## ", 1)[0]
    assert "`ABORTING`" in section and "member by member, each by its exact UUID" in section
    assert "no `ON CLUSTER` statement" in section
    abort_advice = [line for line in runbook.splitlines() if "abort (" in line and "ON CLUSTER" in line]
    assert all("no `ON CLUSTER`" in line or "by its exact UUID" in line for line in abort_advice), abort_advice


ADRS = sorted((DOCS / "adr").glob("*.md"))
NOT_CODES = {"DPONE_EXAMPLE_CLUSTER"}  # a removed Airflow Variable the changelog names, not an error code
NAMED_CODE = re.compile(r"`((?:DPONE_[A-Z0-9_]+)|(?:native_transfer|mssql_native)\.[a-z0-9_]+)`")


@pytest.mark.parametrize("page", [REPO / "CHANGELOG.md", *ADRS], ids=lambda page: page.name)
def test_every_code_the_changelog_and_the_adrs_name_is_registered(page: Path) -> None:
    named = set(NAMED_CODE.findall(page.read_text(encoding="utf-8"))) - NOT_CODES
    assert {code for code in named if registered_name(code) not in REGISTRY} == set()


def test_every_route_has_an_adr_with_its_deliberate_deviations() -> None:
    """One ADR per route (internal and external publication, the native transfer), each in the same sections."""
    assert [page.name[:4] for page in ADRS] == ["0067", "0069", "0070"]
    for page in ADRS:
        text = page.read_text(encoding="utf-8")
        headings = [line.split(" (", 1)[0] for line in text.splitlines() if line.startswith("## ")]
        assert headings == ["## Context", "## Decision", "## Deliberate deviations", "## Consequences"], page.name
        assert text.splitlines()[2].startswith("Status: accepted")
        deviations = text.split("## Deliberate deviations", 1)[1].split("\n## ", 1)[0]
        assert deviations.count("\n- ") >= 2, page.name
