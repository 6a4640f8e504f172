"""Two runs' steps aligned by a shortest edit script over their keys, and where they
part ways (blobviewer.compare.alignment)."""

from __future__ import annotations

import random

import pytest

from blobviewer.compare import alignment
from blobviewer.compare.alignment import Pair, align, first_divergence


def _matches(pairs: list[Pair]) -> int:
    return sum(1 for i, j in pairs if i is not None and j is not None)


def _check(a: list[str], b: list[str], pairs: list[Pair]) -> None:
    """Every step of each run once, in order; matched steps have equal keys."""
    assert [i for i, _ in pairs if i is not None] == list(range(len(a)))
    assert [j for _, j in pairs if j is not None] == list(range(len(b)))
    assert all(a[i] == b[j] for i, j in pairs if i is not None and j is not None)


def _longest_common(a: list[str], b: list[str]) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            if a[i] == b[j]:
                table[i][j] = table[i + 1][j + 1] + 1
            else:
                table[i][j] = max(table[i + 1][j], table[i][j + 1])
    return table[0][0]


def test_the_same_runs_pair_every_step() -> None:
    assert align(["a", "b", "c"], ["a", "b", "c"]) == [(0, 0), (1, 1), (2, 2)]


def test_a_step_only_b_made_pairs_with_a_gap() -> None:
    assert align(["a", "b", "c"], ["a", "x", "b", "c"]) == [(0, 0), (None, 1), (1, 2), (2, 3)]


def test_a_step_only_a_made_pairs_with_a_gap() -> None:
    assert align(["a", "b", "c"], ["a", "c"]) == [(0, 0), (1, None), (2, 1)]


def test_a_changed_step_is_a_gap_on_each_side() -> None:
    assert align(["a", "b", "c"], ["a", "x", "c"]) == [(0, 0), (1, None), (None, 1), (2, 2)]


def test_repeated_steps_pair_in_order() -> None:
    assert align(["ls", "ls", "ls", "cat"], ["ls", "ls", "cat"]) == [
        (0, 0),
        (1, 1),
        (2, None),
        (3, 2),
    ]
    assert align(["t", "e", "t", "e", "t"], ["t", "e", "t"]) == [
        (0, 0),
        (1, 1),
        (2, 2),
        (3, None),
        (4, None),
    ]


def test_reordered_steps_show_as_a_gap_on_each_side() -> None:
    pairs = align(["read a", "read b", "test"], ["read b", "read a", "test"])
    _check(["read a", "read b", "test"], ["read b", "read a", "test"], pairs)
    assert _matches(pairs) == 2
    assert pairs == [(0, None), (1, 0), (None, 1), (2, 2)]


def test_fully_different_runs_pair_nothing() -> None:
    assert align(["a", "b"], ["x", "y", "z"]) == [
        (0, None),
        (1, None),
        (None, 0),
        (None, 1),
        (None, 2),
    ]


def test_empty_sides() -> None:
    assert align([], []) == []
    assert align(["a", "b"], []) == [(0, None), (1, None)]
    assert align([], ["a"]) == [(None, 0)]


def test_the_script_is_a_shortest_one() -> None:
    rng = random.Random(30)
    for _ in range(500):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 14))]
        b = [rng.choice("abcde") for _ in range(rng.randint(0, 14))]
        pairs = align(a, b)
        _check(a, b, pairs)
        assert _matches(pairs) == _longest_common(a, b), (a, b)


def test_a_region_past_the_edit_bound_is_cut_at_keys_unique_to_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(alignment, "MAX_EDITS", 4)
    a = ["x1", "x2", "x3", "A", "x4", "x5", "x6", "B", "x7", "x8"]
    b = ["y1", "y2", "A", "y3", "y4", "y5", "B", "y6"]
    pairs = align(a, b)
    _check(a, b, pairs)
    assert (3, 2) in pairs and (7, 6) in pairs
    assert _matches(pairs) == 2


def test_without_anchors_a_region_past_the_bound_is_left_unpaired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(alignment, "MAX_EDITS", 4)
    a = ["s", "x1", "x2", "x3", "e"]
    b = ["s", "y1", "y2", "y3", "e"]
    # Myers would pair nothing in between either; here it is not even tried.
    assert align(a, b) == [
        (0, 0),
        (1, None),
        (2, None),
        (3, None),
        (None, 1),
        (None, 2),
        (None, 3),
        (4, 4),
    ]


def test_runs_that_share_almost_nothing_stay_within_the_work_budget_at_20000_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Work is counted, not timed (bench/compare_bench.py times it): the alignment stops
    within a round of its budget, however little the runs share."""
    made: list[alignment._Aligner] = []

    class Counting(alignment._Aligner):
        def __init__(self, xs: list[int], ys: list[int]) -> None:
            super().__init__(xs, ys)
            made.append(self)

    monkeypatch.setattr(alignment, "_Aligner", Counting)
    rng = random.Random(7)
    a = [f"k{rng.randrange(40)}" for _ in range(20_000)]
    b = [f"k{rng.randrange(40)}" for _ in range(20_000)]
    pairs = align(a, b)
    (aligner,) = made
    assert aligner.work <= alignment.WORK_BUDGET + alignment.MAX_EDITS + len(a) + len(b)
    _check(a, b, pairs)


def test_mostly_equal_runs_of_20000_steps_get_a_shortest_script() -> None:
    rng = random.Random(8)
    a = [f"step {n}" for n in range(20_000)]
    b = list(a)
    for _ in range(200):
        at = rng.randrange(len(b))
        b[at : at + 1] = rng.choice([[], [f"new {rng.random()}"], [b[at], f"extra {rng.random()}"]])
    pairs = align(a, b)
    _check(a, b, pairs)
    assert _matches(pairs) == len(set(a) & set(b))  # every step both made, matched


def test_the_first_divergence_is_the_first_pair_that_is_not_a_match() -> None:
    assert first_divergence([(0, 0), (1, 1), (None, 2), (2, 3)]) == 2
    assert first_divergence([(0, None)]) == 0
    assert first_divergence([(0, 0), (1, 1)]) is None
    assert first_divergence([]) is None


def test_the_first_divergence_counts_matched_steps_whose_outputs_differ() -> None:
    pairs = [(0, 0), (1, 1), (2, 2), (None, 3)]
    digests_a, digests_b = ["d0", "d1", "d2"], ["d0", "XX", "d2", "d3"]
    assert first_divergence(pairs, lambda i, j: digests_a[i] != digests_b[j]) == 1
    assert first_divergence(pairs, lambda i, j: False) == 3
