"""The product package has no import cycle: no module reaches itself again through the modules it imports.

What counts as an import: every ``import`` statement grimp finds in a module of ``airflow_provider_dpone`` (the
provider's own modules; third-party packages and the separate ``dpone_embedded`` distribution are not nodes), at
module granularity (``a.b.c`` imports ``a.b.d`` is one edge; a package's ``__init__`` is its own node, and the
implicit import of a parent package is not an edge). Counted alike: imports at module level, imports inside a
function (a lazy import defers a dependency, it does not remove it) and imports under ``if TYPE_CHECKING:`` (a
type-only import is still a dependency of the design; ``exclude_type_checking_imports=False``). A cycle is a strongly
connected component of more than one module; the test names each with its size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import grimp
import pytest

pytestmark = pytest.mark.unit

PACKAGE = "airflow_provider_dpone"


def import_graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, exclude_type_checking_imports=False, cache_dir=None)


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found, key=len, reverse=True)


def test_the_product_package_has_no_import_cycle() -> None:
    graph = import_graph()
    edges = {module: sorted(graph.find_modules_directly_imported_by(module)) for module in graph.modules}
    found = cycles(edges)
    assert not found, "\n".join(f"{len(component)} modules: {component}" for component in found)


def test_the_graph_counts_lazy_and_type_checking_imports() -> None:
    """Held so the cycle test cannot pass by not seeing an edge: one import inside a function and one under
    ``TYPE_CHECKING`` are edges of the graph it checks."""
    graph = import_graph()
    lazy = graph.find_modules_directly_imported_by(f"{PACKAGE}.operators.full_refresh")
    assert f"{PACKAGE}.hooks.clickhouse" in lazy  # imported inside the task's run, never at DAG parse
    type_only = graph.find_modules_directly_imported_by(f"{PACKAGE}.hooks.publication")
    assert f"{PACKAGE}.core.clickhouse.connection" in type_only  # under TYPE_CHECKING


def test_the_cycle_finder_finds_a_cycle_and_only_a_cycle() -> None:
    edges = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e"]}
    assert cycles(edges) == [["a", "b", "c"]]
