"""ClickHouse client plumbing both routes use: one factory, one pinned server per session, no retry, no redirect,
one-shot mutations, type parsing and literals."""
