"""The search index over sessions and outputs, and what a search shows."""
