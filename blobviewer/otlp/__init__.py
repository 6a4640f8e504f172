"""The OpenTelemetry receiver: OTLP/HTTP traces and logs recorded as sessions."""
