"""A session's run as people read it: steps, tool arguments, facts, the token chart, sorting."""
