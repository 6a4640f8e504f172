"""URLs for paging links: the current query with some parameters changed."""

from __future__ import annotations

from typing import Any

from django import template
from django.http import QueryDict

from blobviewer.reader.display import selector_url

register = template.Library()


@register.simple_tag(takes_context=True)
def query_with(context: dict[str, Any], **changes: Any) -> str:
    """`?<the current query with *changes*>`; a change to None drops the parameter."""
    query: QueryDict = context["request"].GET.copy()
    for name, value in changes.items():
        if value is None:
            query.pop(name, None)
        else:
            query[name] = str(value)
    return f"?{query.urlencode()}" if query else "?"


register.simple_tag(selector_url)
