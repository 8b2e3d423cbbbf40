"""``dpone`` command line: credential-free static admission (``check``) and planning (``plan``), and the docs.

``dpone docs [PAGE]`` prints the path of a docs page shipped with the package (default: getting-started), the page
an error message names with ``see docs/<page>.md``; exit 2 for an unknown page or a name that is a path (``..``, an
absolute path: never opened), with the coded error as JSON on stderr. ``dpone example-dags`` prints the
folder of the example DAGs (the value for ``[core] dags_folder``).

Neither command reads a connection, resolves a credential, opens a socket or imports Airflow: they read one manifest
file and decide from it alone. Output contract (documented in docs/getting-started.md#cli):

- exit 0: admissible. ``check`` prints the decision JSON on stdout; ``plan`` prints the decision, the declared
  ``source_snapshot`` (transfer route), the normalized plan and its digest.
- exit 2: invalid input (unreadable file, malformed YAML, unknown fields, wrong types, hostile names). stdout is empty;
  stderr holds one JSON document ``{"admissible": false, "errors": [...]}``. Command-line usage errors also exit 2.
- exit 3: a valid manifest that static admission blocks. stdout is empty; stderr holds one JSON document
  ``{"admissible": false, "decision": {...}, "blockers": [...]}`` listing every blocker with its code.

No output carries hosts, credentials, SQL text, file paths or row data.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Final, TextIO

from airflow_provider_dpone import __version__, docs_page, example_dags_folder
from airflow_provider_dpone.admission import AdmissionResult, admit_static
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest import (
    Manifest,
    ManifestError,
    NativeTransferManifest,
    load_manifest,
    normalized_plan,
    normalized_plan_digest,
)

EXIT_OK: Final[int] = 0
EXIT_INVALID_INPUT: Final[int] = 2
EXIT_BLOCKED: Final[int] = 3

EXIT_CODES: Final[tuple[tuple[int, str], ...]] = (
    (EXIT_OK, "admissible: the decision (check) or the decision and plan (plan) is on stdout"),
    (EXIT_INVALID_INPUT, "invalid input: unreadable, malformed, unknown fields, wrong types, hostile names, or usage"),
    (EXIT_BLOCKED, "valid manifest with static admission blockers; every blocker and its code is on stderr"),
)


def _emit(stream: TextIO, document: dict[str, Any]) -> None:
    stream.write(json.dumps(document, indent=2, ensure_ascii=True) + "\n")


def _declared(manifest: Manifest) -> dict[str, Any]:
    """What the manifest declares for the route's opt-in selectors, exactly as written (sanitized enums only)."""
    if not isinstance(manifest, NativeTransferManifest):
        return {}
    snapshot = manifest.source.options.native_transfer.source_snapshot
    declared = (
        None if snapshot is None else {"mode": snapshot.mode.value, "replica_scope": snapshot.replica_scope.value}
    )
    return {"declared": {"source_snapshot": declared}}


def _plan_document(manifest: Manifest, result: AdmissionResult) -> dict[str, Any]:
    return {
        "decision": result.decision.as_dict(),
        **_declared(manifest),
        "normalized_plan": normalized_plan(manifest),
        "normalized_plan_digest": normalized_plan_digest(manifest),
    }


def run(command: str, path: str, stdout: TextIO, stderr: TextIO) -> int:
    """Run ``check`` or ``plan`` on one manifest file and return the exit code."""
    try:
        manifest = load_manifest(path)
    except ManifestError as exc:
        _emit(stderr, {"admissible": False, "errors": [problem.as_dict() for problem in exc.problems]})
        return EXIT_INVALID_INPUT
    except DponeError as exc:
        _emit(stderr, {"admissible": False, "errors": [exc.as_dict()]})
        return EXIT_INVALID_INPUT
    result = admit_static(manifest)
    if not result.admissible:
        _emit(
            stderr,
            {
                "admissible": False,
                "decision": result.decision.as_dict(),
                "blockers": [blocker.as_dict() for blocker in result.blockers],
            },
        )
        return EXIT_BLOCKED
    _emit(stdout, result.decision.as_dict() if command == "check" else _plan_document(manifest, result))
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpone",
        description="Credential-free static admission and planning of dpone manifests (no network, no credentials).",
        epilog="Exit codes: " + "; ".join(f"{code} = {meaning}" for code, meaning in EXIT_CODES),
    )
    parser.add_argument("--version", action="version", version=f"dpone {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{check,plan,docs,example-dags}")
    commands.add_parser("check", help="print the admission decision of a manifest").add_argument(
        "manifest", help="manifest YAML file"
    )
    commands.add_parser("plan", help="print the decision, declared selectors and normalized plan").add_argument(
        "manifest", help="manifest YAML file"
    )
    commands.add_parser("docs", help="print the path of a docs page shipped with the package").add_argument(
        "page", nargs="?", default="getting-started", help="page name, e.g. connections or docs/errors.md"
    )
    commands.add_parser("example-dags", help="print the folder of the example DAGs shipped with the package")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dpone`` command."""
    args = _parser().parse_args(argv)
    if args.command == "docs":
        try:
            print(docs_page(args.page))
        except DponeError as exc:
            _emit(sys.stderr, {"errors": [exc.as_dict()]})
            return EXIT_INVALID_INPUT
        return EXIT_OK
    if args.command == "example-dags":
        print(example_dags_folder())
        return EXIT_OK
    return run(args.command, args.manifest, sys.stdout, sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
