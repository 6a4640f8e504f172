"""The numbers that decide what is promoted and how much of it the model sees."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Policy:
    """Thresholds for promotion, summaries and inspect results, all in UTF-8 bytes or lines."""

    inline_limit: int = 800  # outputs up to this size stay in the history as they are
    summary_limit: int = 400  # a summary never exceeds this
    head_lines: int = 5  # text lines shown at the start of a summary
    tail_lines: int = 3  # text lines shown at the end of a summary
    json_head_entries: int = 2  # array elements shown in a summary
    inspect_head_lines: int = 40  # lines (or entries) shown by inspect without a selector
    inspect_limit: int = 8000  # an inspect result never exceeds this

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"Policy.{name} must be a non-negative int, got {value!r}")


DEFAULT_POLICY = Policy()
