"""Readers: one module per source format (see `app.ingest.readers.base`)."""
