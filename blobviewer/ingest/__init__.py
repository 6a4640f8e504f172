"""Recorded sessions into the database: importers, promotion, rows, watching, rebuilding."""
