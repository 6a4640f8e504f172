"""`{% oneline %}…{% endoneline %}`: markup written over several lines of a template whose
output keeps none of their line breaks.

For markup whose whitespace shows or is read as written: a `<pre>`'s content, runs of
inline elements, a tag with many attributes. Django has no whitespace control, so such
markup used to be one long line. Inside the block, a line break of the template's own text
(with the spaces around it) is dropped where it sits between two tags (`>` and `<`) or
next to a `{% tag %}` or `{{ variable }}`, and is one space anywhere else: inside a text,
or between a tag's attributes. So a space that must come before a `{% tag %}` is written
on the same line as the tag. It is done once, when the template is compiled; what
variables and tags output is untouched (a text's own line breaks stay). Where the output
needs a line break, write `{% newline %}`.
"""

from __future__ import annotations

import re
from typing import Any

from django import template
from django.template.base import Node, NodeList, TextNode

register = template.Library()

_BREAK = re.compile(r"[ \t]*(?:\n[ \t]*)+")


def _joined(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        start, end = match.span()
        if start == 0 or end == len(text):  # next to a tag or a variable
            return ""
        return "" if text[start - 1] == ">" and text[end] == "<" else " "

    return _BREAK.sub(replace, text)


class OneLineNode(Node):
    def __init__(self, nodelist: NodeList) -> None:
        self.nodelist = nodelist

    def render(self, context: Any) -> str:
        return self.nodelist.render(context)


class NewlineNode(TextNode):
    """A line break the output keeps: plain text to render, so it costs nothing in a loop."""


@register.tag
def oneline(parser: Any, token: Any) -> OneLineNode:
    nodelist = parser.parse(("endoneline",))
    parser.delete_first_token()
    for node in nodelist.get_nodes_by_type(TextNode):
        if not isinstance(node, NewlineNode):
            node.s = _joined(node.s)
    return OneLineNode(nodelist)


@register.tag
def newline(parser: Any, token: Any) -> NewlineNode:
    return NewlineNode("\n")
