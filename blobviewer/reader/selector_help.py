"""Selector help fitted to the blob on screen: the selectors that apply to its kind, each
with an example built from the blob itself (its line count, its length, its real keys),
and for a JSON object its keys as completions for the selector box.

The facts come from what the page already has (the Blob row's kind and count) and, for an
object's keys, from a list the caller reads cheaply (the value of a small blob, or the
first keys of a big one's rendering); nothing here reads a blob.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.json_values import display_key
from core.selectors import Key, Keys, Lines, Selector, Slice, escape_surrogates
from core.wording import plural

COMPLETIONS = 200  # keys offered as completions at most; beyond them, keys: pages the rest
_WINDOW = 40  # lines in the text examples (the inspect tool's default page)
_ENTRIES = 10  # entries in the array examples
_ERROR_GREP = "grep:(?i)error"


@dataclass(frozen=True, slots=True)
class Example:
    selector: str
    says: str  # what it selects, in words


@dataclass(frozen=True, slots=True)
class SelectorHelp:
    """*examples* to click; *completions* (`key:name` values) for the box's datalist;
    *unoffered* keys beyond them, listed by *more_keys* (a `keys:` selector)."""

    examples: list[Example]
    completions: list[str]
    unoffered: int = 0
    more_keys: str = ""
    keys_total: int = 0
    note: str = ""  # for kinds no selector applies to


def text_help(lines: int) -> SelectorHelp:
    """Help for a text of *lines* lines."""
    shown = max(1, min(_WINDOW, lines))
    examples = [Example(str(Lines(1, shown)), f"the first {plural(shown, 'line')}")]
    if lines > _WINDOW:
        last = Lines(lines - _WINDOW + 1, lines)
        examples.append(Example(str(last), f"the last {_WINDOW} lines"))
    examples.append(Example(_ERROR_GREP, "lines that match a regex (here: error, any case)"))
    if lines > _WINDOW:
        narrowed = f"{Lines(1, min(lines, 1000))} | grep:TODO"
        examples.append(Example(narrowed, "matches within some lines only"))
    return SelectorHelp(examples, [])


def array_help(entries: int, first_key: str | None = None) -> SelectorHelp:
    """Help for an array of *entries* entries; *first_key*: its first entry's first key,
    when that entry is an object (then `key:` over the entries is an example too)."""
    shown = min(_ENTRIES, entries)
    examples = [Example(str(Slice(0, shown or _ENTRIES)), f"the first {shown or _ENTRIES} entries")]
    if entries > _ENTRIES:
        examples.append(Example(str(Slice(entries - _ENTRIES, entries)), "the last 10 entries"))
    if entries > 1:
        middle = entries // 2
        examples.append(Example(str(Slice(middle, middle + 1)), f"entry {middle:,} alone"))
    if first_key is not None:
        examples.append(Example(str(Key(first_key)), "that key of every entry"))
    return SelectorHelp(examples, [])


def object_help(keys: list[tuple[str, str]], total: int) -> SelectorHelp:
    """Help for an object of *total* keys, of which *keys* (name, shape of its value) are
    known, in document order; the first COMPLETIONS of them become completions."""
    examples = []
    if keys:
        name, value_shape = keys[0]
        examples.append(Example(str(Key(name)), f"the value of {_shown(name)} ({value_shape})"))
    array = _biggest(keys, "array[")
    if array:
        examples.append(
            Example(
                str(Selector((Key(array[0]), Slice(0, _ENTRIES)))), f"entries of {_shown(array[0])}"
            )
        )
    string = _biggest(keys, "string(")
    if string:
        examples.append(
            Example(
                str(Selector((Key(string[0]), Lines(1, _WINDOW)))), f"{_shown(string[0])} as text"
            )
        )
    inner = _biggest(keys, "object{")
    if inner:
        examples.append(
            Example(str(Selector((Key(inner[0]), Keys(0, 50)))), f"the keys of {_shown(inner[0])}")
        )
    window = min(total, 50) or 50
    examples.append(Example(str(Keys(0, window)), "the key lines: name and shape"))
    offered = keys[:COMPLETIONS]
    unoffered = max(0, total - len(offered))
    more = str(Keys(len(offered), len(offered) + COMPLETIONS)) if unoffered else ""
    completions = [str(Key(k)) for k, _ in offered]
    return SelectorHelp(examples, completions, unoffered, more, keys_total=total)


def _biggest(keys: list[tuple[str, str]], prefix: str) -> tuple[str, str] | None:
    """The key whose value has the shape *prefix* (`array[`) with the biggest size."""
    sized = [(int(s[len(prefix) : -1] or 0), k, s) for k, s in keys if s.startswith(prefix)]
    if not sized:
        return None
    _, key, value_shape = max(sized, key=lambda item: item[0])
    return key, value_shape


def scalar_help(kind: str) -> SelectorHelp:
    """A JSON number, boolean or null: nothing to select in it."""
    return SelectorHelp(
        [],
        [],
        note=f"this blob is a single {kind.removeprefix('json_')}: "
        "no selector applies; it is shown whole",
    )


def string_help() -> SelectorHelp:
    """A JSON string blob reads as text."""
    examples = [
        Example(str(Lines(1, _WINDOW)), f"the first {_WINDOW} lines of the string"),
        Example(_ERROR_GREP, "lines that match a regex"),
    ]
    return SelectorHelp(examples, [])


def _shown(key: str) -> str:
    """A key as one line of a page shows it (a lone surrogate as its escape)."""
    return escape_surrogates(display_key(key))
