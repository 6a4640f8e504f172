"""The OpenTelemetry receiver: OTLP/HTTP traces and logs of GenAI agents, recorded as
sessions (docs/otlp.md)."""
