"""Print what ``make test-real`` ran: per test module, how many cases passed, failed and were skipped, then every skip
with its reason. A skipped case is listed as skipped, never counted with the passes.

Usage: ``python scripts/ci/real_summary.py build/test-real.xml`` (pytest's JUnit XML). Exits 1 when the report is
missing, when nothing passed, or when any case failed or errored; 0 otherwise.
"""

from __future__ import annotations

import collections
import sys
import xml.etree.ElementTree as ET  # our own pytest report, not untrusted input
from pathlib import Path

OUTCOMES = ("passed", "failed", "skipped")


def outcomes(report: Path) -> tuple[dict[str, collections.Counter[str]], list[tuple[str, str]]]:
    """Per module the count of each outcome, and every skipped case with its reason."""
    per_module: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    skips: list[tuple[str, str]] = []
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314 - our own pytest report
        module = case.get("classname", "").split(".")
        name = ".".join(part for part in module if part.startswith("test_")) or ".".join(module)
        if (skipped := case.find("skipped")) is not None:
            per_module[name]["skipped"] += 1
            skips.append((f"{name}::{case.get('name')}", skipped.get("message", "").strip()))
        elif case.find("failure") is not None or case.find("error") is not None:
            per_module[name]["failed"] += 1
        else:
            per_module[name]["passed"] += 1
    return per_module, skips


def main(argv: list[str]) -> int:
    report = Path(argv[1]) if len(argv) > 1 else Path("build/test-real.xml")
    if not report.exists():
        print(f"test-real: no report at {report}: the suite did not run")
        return 1
    per_module, skips = outcomes(report)
    total: collections.Counter[str] = collections.Counter()
    print("test-real summary (real servers: compose ClickHouse, Keeper, SQL Server)")
    for module in sorted(per_module):
        counts = per_module[module]
        total.update(counts)
        print(f"  {module:<40} " + "  ".join(f"{outcome} {counts[outcome]:>3}" for outcome in OUTCOMES))
    print(f"  {'total':<40} " + "  ".join(f"{outcome} {total[outcome]:>3}" for outcome in OUTCOMES))
    if skips:
        print("skipped (not passes):")
        for case, reason in skips:
            print(f"  {case}: {reason}")
    return 1 if total["failed"] or not total["passed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
