"""``dpone`` command line: credential-free static admission (``check``) and planning (``plan``)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dpone`` command."""
    raise NotImplementedError("DPONE_CLI: the check/plan commands are being built")


if __name__ == "__main__":
    sys.exit(main())
