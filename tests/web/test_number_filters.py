"""The pages' own number filters (blobviewer.templatetags.numbers) give the text Django's
`intcomma` and `filesizeformat` give, for the numbers the pages show and anything else."""

from __future__ import annotations

import random

import pytest
from django.contrib.humanize.templatetags.humanize import intcomma
from django.template import Context, Template
from django.template.defaultfilters import filesizeformat

from blobviewer.templatetags.numbers import bytesize, thousands

_rng = random.Random(26)
EDGES = [0, 1, -1, 999, 1_000, 1_023, 1_024, 1_025, 999_999, 1_000_000, 2**20 - 1, 2**20]
EDGES += [2**30 - 1, 2**30, 2**40, 2**50, 2**60, -2_048, -(10**7), 10**18]
COUNTS = EDGES + [_rng.randrange(-(10**13), 10**13) for _ in range(2_000)]
SIZES = EDGES + [int(_rng.lognormvariate(10, 5)) for _ in range(2_000)]
OTHERS = [None, "", "12", "twelve", 1.5, 1234.5, True, False]


def test_thousands_writes_every_integer_as_intcomma_does():
    assert [thousands(n) for n in COUNTS] == [intcomma(n) for n in COUNTS]
    assert thousands(1234567) == "1,234,567"


def test_bytesize_writes_every_size_as_filesizeformat_does():
    assert [bytesize(n) for n in SIZES] == [filesizeformat(n) for n in SIZES]
    assert bytesize(1536) == "1.5\xa0KB" and bytesize(1) == "1\xa0byte"


@pytest.mark.parametrize("value", OTHERS)
def test_anything_else_is_left_to_djangos_filters(value):
    assert thousands(value) == str(intcomma(value))
    assert bytesize(value) == str(filesizeformat(value))


def test_a_template_escapes_what_they_give():
    rendered = Template("{% load numbers %}{{ v|thousands }} {{ n|bytesize }}").render(
        Context({"v": "<b>", "n": 2048})
    )
    assert rendered == "&lt;b&gt; 2.0\xa0KB"
