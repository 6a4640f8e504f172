"""A byte stream cut into lines, in time linear in its size: each chunk read is scanned for
newlines once, and a line that spans many chunks grows in one buffer, handed over whole
when its end arrives (never joined or copied again).

The stdio transports of MCP carry one JSON-RPC message per line, and a tool result of
hundreds of megabytes is one line: a reader that re-scans (or re-joins) everything it
holds for each chunk it reads takes time quadratic in the line's length.
"""

from __future__ import annotations

__all__ = ["Line", "LineSplitter"]

# A line that fits in the chunk that ends it is a slice of it; a longer one is the buffer
# it grew in.
Line = bytes | bytearray


class LineSplitter:
    """Lines of a byte stream fed a chunk at a time; each line keeps its `\\n`.

    `scanned` counts the bytes searched for a newline: every byte fed, once.
    """

    def __init__(self) -> None:
        self._pending = bytearray()  # the line begun but not ended
        self.scanned = 0

    def feed(self, chunk: bytes) -> list[Line]:
        """The lines that *chunk* ends, the unfinished one before them completed."""
        lines: list[Line] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if self._pending:
                self._pending += memoryview(chunk)[start : end + 1]
                lines.append(self._pending)
                self._pending = bytearray()
            else:
                lines.append(chunk[start : end + 1])
            start = end + 1
        self.scanned += len(chunk)
        self._pending += memoryview(chunk)[start:]
        return lines

    def rest(self) -> bytearray:
        """What came after the last newline (at the end of the stream, its last line)."""
        rest, self._pending = self._pending, bytearray()
        return rest
