"""What both routes use and no route owns: errors, manifest, canonical JSON and digests, identifiers, the typed row
digest, ClickHouse client plumbing (one-shot, no retry, no redirect), object storage. Imports no route."""
