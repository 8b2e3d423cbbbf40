"""Interfaces (``typing.Protocol``) the protocol needs from the outside world.

The protocol depends only on these; adapters implement them for real systems and in-memory fakes implement them for
the deterministic fault simulation. Both run the same contract tests.
"""

from __future__ import annotations
