"""The agent loop with promotion wired in: the Worker (core.agent.worker), its model
clients, the history it keeps, the tools it calls and their schemas, the promotion policy,
and the JSONL session log it records (docs/agents.md, docs/session-log.md)."""
