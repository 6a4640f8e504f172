"""The templates read as code: no line over 160 characters, and `{% oneline %}` (which lets
whitespace-sensitive markup be written over several lines) outputs what one line would."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.template import Context, Template

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
LONGEST_LINE = 160


def test_no_template_line_is_over_160_characters():
    templates = sorted(TEMPLATES.rglob("*.html"))
    assert templates

    too_long = [
        f"{path.relative_to(TEMPLATES)}:{number}: {len(line)} characters"
        for path in templates
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if len(line) > LONGEST_LINE
    ]

    assert too_long == []


def render(source: str, **context) -> str:
    return Template("{% load oneline %}" + source).render(Context(context))


@pytest.mark.parametrize(
    ("source", "output"),
    [
        # Between two tags, or next to a {% tag %} or {{ variable }}: nothing.
        ("<p>\n  <b>x</b>\n</p>", "<p><b>x</b></p>"),
        ("<p>{% if on %}\n  on\n{% endif %}</p>", "<p>on</p>"),
        ("<i>{{ n }}\n  </i>", "<i>3</i>"),
        # Inside a text, or between a tag's attributes: one space.
        ("<p>three words\n    of text</p>", "<p>three words of text</p>"),
        ('<a href="/x"\n    title="t">x</a>', '<a href="/x" title="t">x</a>'),
        ("<b>{{ n }}</b> received →\n  <b>2</b>", "<b>3</b> received → <b>2</b>"),
        # A line break the output needs.
        ("<pre>\n  <b>1</b>{% newline %}\n  <b>2</b>\n</pre>", "<pre><b>1</b>\n<b>2</b></pre>"),
    ],
)
def test_oneline_drops_the_templates_own_line_breaks(source, output):
    assert render("{% oneline %}" + source + "{% endoneline %}", n=3, on=True) == output


def test_oneline_keeps_what_variables_output_and_breaks_outside_it():
    source = "{% oneline %}\n<pre>{{ text }}</pre>\n{% endoneline %}\n<p>\n"

    assert render(source, text="a\n  b") == "<pre>a\n  b</pre>\n<p>\n"


def test_oneline_reaches_into_loops_and_branches():
    source = "<ul>\n{% for n in ns %}\n  <li>{{ n }}</li>\n{% endfor %}\n</ul>"
    source = "{% oneline %}" + source + "{% endoneline %}"

    assert render(source, ns=[1, 2]) == "<ul><li>1</li><li>2</li></ul>"
