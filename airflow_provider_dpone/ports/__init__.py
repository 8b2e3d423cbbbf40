"""Interfaces (``typing.Protocol``) the protocol needs from the outside world.

The protocol depends only on these; adapters implement them for real systems and in-memory fakes implement them for
the deterministic fault simulation. Both run the same contract tests, so a fake cannot drift from the real system.
One module per concern: ``publication`` (authority, cluster catalog, member sessions, cluster DDL, artifact store)
and ``transfer`` (snapshot source, durable stage and journal, transfer target).
"""
