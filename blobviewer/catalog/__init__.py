"""The site's catalog of blobs (Blob rows), where they came from, and what is kept or removed."""
