"""Hypothesis strategies shared by the core tests."""

from __future__ import annotations

from hypothesis import strategies as st

# Any JSON value Python holds: ints far beyond 64 bits, any text (lone surrogates too).
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**300), max_value=2**300)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec=None)),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(alphabet=st.characters(codec=None)), children, max_size=5)
    ),
    max_leaves=30,
)
