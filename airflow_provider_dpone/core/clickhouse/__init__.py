"""ClickHouse client plumbing both routes use: one factory, one pinned server per session, no retry, no redirect; the
resolved connection; the typed row-hash SQL."""
