"""Command line of the embedded cluster.

``up --dir DIR [--members N] [--internal-replication true|false]`` starts a cluster and prints one JSON object
(cluster name, coordinator, members, Airflow connection as URI and JSON) once it is ready; the processes keep
running after the command returns. On a directory that held a cluster, ``up`` keeps its password (unless
``--password`` says otherwise) and its ports where they are free; when the Airflow connection still changes, it says
so on stderr with the commands that replace it (never the password: it is only in the JSON on stdout). ``status --dir DIR`` prints the same object plus pids; ``down --dir DIR`` stops
every process. ``fault --dir DIR <action> ...`` drives the fault controls; ``compose`` renders the docker-compose
files from the shared topology (``--check`` fails when the checked-in files differ).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import secrets
import shlex
import sys
from pathlib import Path

from dpone_embedded import compose, launcher
from dpone_embedded.cluster import EmbeddedCluster


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError("expected true or false")


def _target(text: str) -> str | int:
    return int(text) if text.isdigit() else text


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dpone_embedded", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start a cluster and print its description as JSON")
    up.add_argument("--dir", required=True, type=Path)
    up.add_argument("--members", type=int, default=2)
    up.add_argument("--internal-replication", type=_bool, default=False)
    up.add_argument(
        "--password",
        default=None,
        help="the HTTP password of every process (default: the directory's previous one, else a generated one; "
        "printed in the connection JSON)",
    )
    for name, text in (("status", "print the cluster description and process ids"), ("down", "stop every process")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--dir", required=True, type=Path)

    fault = commands.add_parser("fault", help="arm, list or reset faults")
    fault.add_argument("--dir", required=True, type=Path)
    actions = fault.add_subparsers(dest="action", required=True)
    for name in _TARGET_ACTIONS:
        actions.add_parser(name).add_argument("target", type=_target)
    hold = actions.add_parser("hold-ddl", help="the initiator holds the next matching ON CLUSTER request unqueued")
    hold.add_argument("target", type=_target)
    hold.add_argument("--match", default="", help="regular expression searched in the statement text")
    lag = actions.add_parser("lag-replication", help="the member's replicas execute entries only SECONDS old")
    lag.add_argument("target", type=_target)
    lag.add_argument("seconds", type=float)
    fail_ddl = actions.add_parser("fail-ddl", help="the member's next DDL queue entry fails with CODE")
    fail_ddl.add_argument("target", type=_target)
    fail_ddl.add_argument("code", type=int)
    fail_statement = actions.add_parser("fail-statement", help="the next matching statement fails with CODE")
    fail_statement.add_argument("target", type=_target)
    fail_statement.add_argument("code", type=int)
    lose = actions.add_parser("lose-response", help="the next matching statement's response is lost")
    lose.add_argument("target", type=_target)
    delay = actions.add_parser("delay", help="the next matching statement's response waits SECONDS")
    delay.add_argument("target", type=_target)
    delay.add_argument("seconds", type=float)
    for sub in (fail_ddl, fail_statement, lose, delay):
        sub.add_argument("--match", default="", help="regular expression searched in the statement text")
        sub.add_argument("--count", type=int, default=1)
    actions.add_parser("list")
    actions.add_parser("reset")

    render = commands.add_parser("compose", help="render docker-compose.yaml and deploy/ from the topology")
    render.add_argument("--out", type=Path, default=Path("."))
    render.add_argument("--check", action="store_true", help="fail if the files in --out differ from a rendering")
    return parser


_TARGET_ACTIONS = (
    "pause",
    "resume",
    "kill",
    "restart",
    "pause-replication",
    "resume-replication",
    "stall-replication",
    "release-ddl",
    "emulate-restart",
)
"""Fault actions that take only a target; each calls the :class:`Faults` method of the same name."""


def _fault(cluster: EmbeddedCluster, args: argparse.Namespace) -> object:
    faults = cluster.faults
    action = args.action
    if action == "list":
        return {"armed": faults.armed(), "killed": faults.killed()}
    if action == "reset":
        faults.reset()
    elif action in _TARGET_ACTIONS:
        getattr(faults, action.replace("-", "_"))(args.target)
    elif action == "hold-ddl":
        faults.hold_ddl(args.target, match=args.match)
    elif action == "lag-replication":
        faults.lag_replication(args.target, args.seconds)
    elif action == "fail-ddl":
        faults.fail_next_ddl(args.target, args.code, match=args.match, count=args.count)
    elif action == "fail-statement":
        faults.fail_next_statement(args.target, args.code, match=args.match, count=args.count)
    elif action == "lose-response":
        faults.lose_response(args.target, match=args.match, count=args.count)
    elif action == "delay":
        faults.delay_response(args.target, args.seconds, match=args.match, count=args.count)
    return {"armed": faults.armed(), "killed": faults.killed()}


MISSING_CHDB = (
    "the embedded cluster needs chdb, which is not installed: "
    "pip install dpone-embedded (from a clone of the provider: pip install ./packages/dpone-embedded)"
)


def chdb_installed() -> bool:
    try:
        return importlib.util.find_spec("chdb") is not None
    except ValueError:  # a module entry without a spec: not importable either
        return False


def _previous_cluster(directory: Path) -> EmbeddedCluster | None:
    """The handle of the cluster ``directory`` held before (stopped), or ``None`` when it held none."""
    try:
        return EmbeddedCluster.attach(directory)
    except (FileNotFoundError, KeyError, ValueError, TypeError):
        return None


def _changed_connection(previous: EmbeddedCluster, cluster: EmbeddedCluster) -> str:
    """The loud notice that the directory's Airflow connection changed: what changed, and the commands that replace
    the saved connection. It never carries the password (stderr ends up in terminals, CI logs and pastes): the
    command reads the new connection from ``status`` at the moment it runs."""
    changed = [
        what
        for what, before, after in (
            ("password", previous.password, cluster.password),
            ("coordinator port", previous.coordinator.address, cluster.coordinator.address),
            ("members", previous.connection_extra(), cluster.connection_extra()),
        )
        if before != after
    ]
    python = shlex.quote(sys.executable)
    status = f"{python} -m dpone_embedded status --dir {shlex.quote(str(cluster.directory))}"
    read_uri = f"{python} -c 'import json,sys; print(json.load(sys.stdin)[\"airflow_connection_uri\"])'"
    return (
        f"WARNING: the Airflow connection of the embedded cluster in {cluster.directory} changed "
        f"({', '.join(changed) or 'connection'}): a connection saved for it before no longer works. Replace it "
        "(the new connection, password included, is airflow_connection_uri in the JSON on stdout):\n"
        f"  airflow connections delete dpone_clickhouse_default\n"
        f'  airflow connections add dpone_clickhouse_default --conn-uri "$({status} | {read_uri})"'
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "up" and not chdb_installed():
        print(MISSING_CHDB, file=sys.stderr)
        return 2
    try:
        if args.command == "compose":
            differences = compose.write(args.out, check=args.check)
            for path in differences:
                print(f"differs from the topology: {path}", file=sys.stderr)
            return 1 if differences else 0
        if args.command == "up":
            previous = _previous_cluster(args.dir)
            password = args.password
            if password is None:
                password = previous.password if previous is not None else secrets.token_urlsafe(18)
            cluster = EmbeddedCluster.start(
                args.dir, args.members, args.internal_replication, password=password, owned=False
            )
            if previous is not None and previous.connection_uri() != cluster.connection_uri():
                print(_changed_connection(previous, cluster), file=sys.stderr)
            output: object = cluster.describe()
        elif args.command == "status":
            cluster = EmbeddedCluster.attach(args.dir)
            output = {**cluster.describe(), "processes": cluster.processes()}
        elif args.command == "down":
            output = {"stopped": launcher.stop_all(args.dir.resolve())}
        else:
            output = _fault(EmbeddedCluster.attach(args.dir), args)
    except (launcher.LaunchError, FileNotFoundError, ValueError, KeyError) as exc:
        print(json.dumps({"error": type(exc).__name__, "detail": str(exc)}), file=sys.stderr)
        return 2
    print(json.dumps(output, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
