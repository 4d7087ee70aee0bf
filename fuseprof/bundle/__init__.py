"""The bundle stage: a capture's folder on disk (``files``), its column schema (``schema``), reading
bundles into frames (``loading``), making bundles from existing files (``ingest``), rebuilding their
tables from raw artifacts (``reparse``) and the provenance every manifest records (``provenance``).
Needs the parsers; nothing from capture."""
