"""Two runs' steps aligned: a minimal edit script over their step keys, as pairs.

Each pair is (step of A, step of B): a match (i, j), a step only A made (i, None), or
one only B made (None, j), in the order of both runs. The script is Myers' O(ND)
difference algorithm (Myers 1986, "An O(ND) Difference Algorithm and Its Variations"),
which finds a shortest script (fewest steps unpaired) without a table of n×m cells: its
work grows with the number of steps and with the square of the steps that differ.

Two runs that share almost nothing would make that square huge, so the work is bounded:

1. the steps both runs begin with, and end with, are paired first (the common prefix and
   suffix), which costs one comparison a step;
2. Myers runs on what is left and gives up past MAX_EDITS unpaired steps, or once the
   whole alignment has spent WORK_BUDGET of its inner steps; it does not start when the
   keys the two parts share (counted with repeats) already leave more than MAX_EDITS
   steps unpaired, and parts that share no key at all are left unpaired at once;
3. a region Myers gave up on is cut at anchors: keys that occur once in each run's part
   of the region, the longest run of them in the same order in both (patience diff's
   anchors); each piece between two anchors is aligned again from step 1;
4. a piece with no anchor is paired nothing: its steps are unpaired on each side.

Runs that are mostly the same with edits here and there (the common case, and what the
issue measures) never leave step 2, so their script is minimal; bench/compare_bench.py
keeps 20,000 steps a side under a second either way.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Sequence

Pair = tuple[int | None, int | None]

# Myers gives up on a region once more steps than this are unpaired in it...
MAX_EDITS = 2_000
# ...or once the alignment as a whole has made this many inner steps (diagonals tried and
# snake comparisons): ~0.25 s of pure Python on a 2-core machine, whatever the runs.
WORK_BUDGET = 400_000
# Cuts at anchors within cuts at anchors, at most (each piece is smaller than the last;
# this keeps Python's recursion far from its limit on any input).
MAX_DEPTH = 50
# A snake (a run of equal keys) is followed this many keys at a time by comparing slices,
# which Python does in C; the last few keys one at a time.
_SNAKE_STRIDE = 32


def align(a: Sequence[str], b: Sequence[str]) -> list[Pair]:
    """The steps of runs *a* and *b* (their keys, in order) paired by a shortest edit
    script: equal keys in order are matched, a step one run made and the other did not
    pairs with None (A's unpaired steps before B's where both occur at one place).
    Repeated keys pair in order; reordered steps show as a gap on each side. Work is
    bounded (see the module's docstring): a region too different to align cheaply is
    left unpaired rather than searched."""
    codes: dict[str, int] = {}
    xs = [codes.setdefault(key, len(codes)) for key in a]
    ys = [codes.setdefault(key, len(codes)) for key in b]
    aligner = _Aligner(xs, ys)
    aligner.region(0, len(xs), 0, len(ys), depth=0)
    return aligner.pairs


def first_divergence(
    pairs: Sequence[Pair], outputs_differ: Callable[[int, int], bool] | None = None
) -> int | None:
    """The index in *pairs* of the first pair that is not a match, or that is a match
    whose outputs differ: ``outputs_differ(i, j)`` is asked of matches (i, j) in order,
    until one is true (e.g. ``lambda i, j: digests_a[i] != digests_b[j]``). None when
    every pair is a match with the same output (or there are no pairs)."""
    for number, (i, j) in enumerate(pairs):
        if i is None or j is None:
            return number
        if outputs_differ is not None and outputs_differ(i, j):
            return number
    return None


class _Aligner:
    """The pairs of one alignment, appended in order, and the work spent on them."""

    def __init__(self, xs: list[int], ys: list[int]) -> None:
        self.xs = xs
        self.ys = ys
        self.pairs: list[Pair] = []
        self.work = 0

    def region(self, a_lo: int, a_hi: int, b_lo: int, b_hi: int, *, depth: int) -> None:
        """Pair steps a_lo..a_hi-1 of A with b_lo..b_hi-1 of B (half-open ranges); *depth*
        counts the cuts at anchors that led here."""
        xs, ys = self.xs, self.ys
        while a_lo < a_hi and b_lo < b_hi and xs[a_lo] == ys[b_lo]:
            self.pairs.append((a_lo, b_lo))
            a_lo += 1
            b_lo += 1
        suffix = 0
        while (
            a_lo < a_hi - suffix
            and b_lo < b_hi - suffix
            and xs[a_hi - suffix - 1] == ys[b_hi - suffix - 1]
        ):
            suffix += 1
        a_end, b_end = a_hi - suffix, b_hi - suffix
        shared = _common(xs[a_lo:a_end], ys[b_lo:b_end])
        if shared == 0:
            self._unpaired(a_lo, a_end, b_lo, b_end)
        elif (a_end - a_lo) + (b_end - b_lo) - 2 * shared > MAX_EDITS:
            # At least that many steps would stay unpaired: no need to search.
            self._cut_or_leave(a_lo, a_end, b_lo, b_end, depth=depth)
        elif (script := self._myers(a_lo, a_end, b_lo, b_end)) is not None:
            self.pairs.extend(script)
        else:
            self._cut_or_leave(a_lo, a_end, b_lo, b_end, depth=depth)
        self.pairs.extend(zip(range(a_end, a_hi), range(b_end, b_hi), strict=True))

    def _cut_or_leave(self, a_lo: int, a_hi: int, b_lo: int, b_hi: int, *, depth: int) -> None:
        if depth < MAX_DEPTH:
            self._anchored(a_lo, a_hi, b_lo, b_hi, depth=depth + 1)
        else:
            self._unpaired(a_lo, a_hi, b_lo, b_hi)

    def _unpaired(self, a_lo: int, a_hi: int, b_lo: int, b_hi: int) -> None:
        self.pairs.extend((i, None) for i in range(a_lo, a_hi))
        self.pairs.extend((None, j) for j in range(b_lo, b_hi))

    def _anchored(self, a_lo: int, a_hi: int, b_lo: int, b_hi: int, *, depth: int) -> None:
        """Cut the region at its anchors and align each piece; no anchor: pair nothing."""
        anchors = _anchors(self.xs[a_lo:a_hi], self.ys[b_lo:b_hi])
        if not anchors:
            self._unpaired(a_lo, a_hi, b_lo, b_hi)
            return
        i, j = a_lo, b_lo
        for x, y in anchors:
            self.region(i, a_lo + x, j, b_lo + y, depth=depth)
            self.pairs.append((a_lo + x, b_lo + y))
            i, j = a_lo + x + 1, b_lo + y + 1
        self.region(i, a_hi, j, b_hi, depth=depth)

    def _myers(self, a_lo: int, a_hi: int, b_lo: int, b_hi: int) -> list[Pair] | None:
        """The shortest script for the region, or None when it would take more than
        MAX_EDITS unpaired steps or more work than the budget has left."""
        xs, ys = self.xs, self.ys
        n, m = a_hi - a_lo, b_hi - b_lo
        limit = min(MAX_EDITS, n + m)
        offset = limit + 1
        furthest = [0] * (2 * limit + 3)  # furthest x reached on each diagonal k = x - y
        trace: list[list[int]] = []
        for d in range(limit + 1):
            trace.append(furthest[offset - d - 1 : offset + d + 2])
            self.work += d + 1
            for k in range(-d, d + 1, 2):
                if k == -d or (k != d and furthest[offset + k - 1] < furthest[offset + k + 1]):
                    x = furthest[offset + k + 1]  # down: a step of B
                else:
                    x = furthest[offset + k - 1] + 1  # right: a step of A
                y = x - k
                start = x
                while x + _SNAKE_STRIDE <= n and y + _SNAKE_STRIDE <= m:
                    if (
                        xs[a_lo + x : a_lo + x + _SNAKE_STRIDE]
                        != ys[b_lo + y : b_lo + y + _SNAKE_STRIDE]
                    ):
                        break
                    x += _SNAKE_STRIDE
                    y += _SNAKE_STRIDE
                while x < n and y < m and xs[a_lo + x] == ys[b_lo + y]:
                    x += 1
                    y += 1
                self.work += (x - start) // _SNAKE_STRIDE + 1
                furthest[offset + k] = x
                if x >= n and y >= m:
                    return _backtrack(trace, n, m, a_lo, b_lo)
            if self.work > WORK_BUDGET:
                return None
        return None


def _backtrack(trace: list[list[int]], n: int, m: int, a_lo: int, b_lo: int) -> list[Pair]:
    """The script Myers found, read back from the furthest points saved before each
    round: ``trace[d][k + d + 1]`` is the furthest x on diagonal k after round d-1."""
    backwards: list[Pair] = []
    x, y = n, m
    for d in range(len(trace) - 1, -1, -1):
        before = trace[d]
        k = x - y
        if d == 0:
            previous_x = previous_y = 0
        else:
            down = k == -d or (k != d and before[k - 1 + d + 1] < before[k + 1 + d + 1])
            previous_k = k + 1 if down else k - 1
            previous_x = before[previous_k + d + 1]
            previous_y = previous_x - previous_k
        while x > previous_x and y > previous_y:  # the snake: matches
            x -= 1
            y -= 1
            backwards.append((a_lo + x, b_lo + y))
        if d > 0:
            if x == previous_x:  # came down: a step only B made
                backwards.append((None, b_lo + previous_y))
            else:  # came right: a step only A made
                backwards.append((a_lo + previous_x, None))
            x, y = previous_x, previous_y
    backwards.reverse()
    return backwards


def _common(xs: list[int], ys: list[int]) -> int:
    """How many keys the two lists share, counted with repeats: no script pairs more."""
    return sum((Counter(xs) & Counter(ys)).values())


def _anchors(xs: list[int], ys: list[int]) -> list[tuple[int, int]]:
    """Positions (x, y) of keys that occur once in *xs* and once in *ys*, the longest
    sequence of them in the same order in both (patience sorting's longest increasing
    subsequence of their positions in *ys*), in order."""
    once_x = {key for key, count in Counter(xs).items() if count == 1}
    once_y = {key for key, count in Counter(ys).items() if count == 1}
    where_y = {key: y for y, key in enumerate(ys) if key in once_y and key in once_x}
    candidates = [(x, where_y[key]) for x, key in enumerate(xs) if key in where_y]
    # Longest increasing subsequence of the y's, in O(k log k).
    tails: list[int] = []  # tails[length - 1]: the smallest y ending such a run
    tail_at: list[int] = []  # the candidate holding that y
    previous: list[int] = []  # each candidate's predecessor in its run
    for number, (_, y) in enumerate(candidates):
        length = bisect_left(tails, y)
        if length == len(tails):
            tails.append(y)
            tail_at.append(number)
        else:
            tails[length] = y
            tail_at[length] = number
        previous.append(tail_at[length - 1] if length else -1)
    chain: list[tuple[int, int]] = []
    at = tail_at[-1] if tail_at else -1
    while at >= 0:
        chain.append(candidates[at])
        at = previous[at]
    chain.reverse()
    return chain
