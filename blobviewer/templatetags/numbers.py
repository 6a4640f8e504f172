"""Counts and byte sizes as the pages show them: `{{ n|thousands }}` (`1,234,567`) and
`{{ n|bytesize }}` (`1.2 MB`), the text Django's `intcomma` and `filesizeformat` give on
this English-only site (USE_I18N is off).

Those two go through Django's locale machinery for every number: format lookups, then a
walk over the number's digits. With a dozen numbers a row they took a sixth of rendering
the session list (50 rows); an integer is formatted here directly, and anything else
(a float, a string) is left to Django's filter.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.contrib.humanize.templatetags.humanize import intcomma
from django.template.defaultfilters import filesizeformat

register = template.Library()

_UNITS = ((1 << 50, "PB"), (1 << 40, "TB"), (1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB"))
_NO_BREAK = "\xa0"  # as Django's avoid_wrapping puts between a number and its unit


@register.filter(is_safe=True)
def thousands(value: Any) -> str:
    """*value* with a comma between each three digits, as `intcomma`."""
    if type(value) is int:
        return f"{value:,}"
    return str(intcomma(value))


@register.filter(is_safe=True)
def bytesize(value: Any) -> str:
    """*value* bytes in the largest unit under it, to a tenth, as `filesizeformat`:
    `512 bytes`, `1 byte`, `1.5 KB`, `2.0 MB`."""
    if type(value) is not int:
        return str(filesizeformat(value))
    size = abs(value)
    sign = "-" if value < 0 else ""
    for unit_bytes, unit in _UNITS:
        if size >= unit_bytes:
            return f"{sign}{round(size / unit_bytes, 1):.1f}{_NO_BREAK}{unit}"
    return f"{sign}{size}{_NO_BREAK}byte{'' if size == 1 else 's'}"
