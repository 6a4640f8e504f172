"""How a tool call's arguments read: one helper shared by the timeline, the item page and
the blob reader's titles.

`arguments_view(tool, arguments)` turns a call's recorded arguments into an `ArgsView`: a
shell command as a command, a path as a path, an edit as a small diff (where the arguments
have old and new strings, or a whole new file), a search as its pattern and path, and any
other tool's arguments as `key: value` lines — never escaped JSON on one line. With a
*budget* (the timeline's) the view is cut to about that many bytes of escaped HTML text and
says how many bytes it left out; without one (an item's own page) nothing is cut.

`one_line(tool, arguments)` is the same call as a short title: `Read src/app.py`,
`bash: pytest -x`, `Grep TODO in src`, or just the tool name for tools it does not know.

Nothing here marks text safe: views hold plain strings that templates escape.
"""

from __future__ import annotations

import difflib
import html
import json
import shlex
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

# Tool names as agents spell them, compared case-insensitively.
SHELL_TOOLS = frozenset(
    {
        "bash",
        "shell",
        "exec_command",
        "execute_bash",
        "run_shell_command",
        "run_command",
        "shell_command",
        "local_shell",
        "terminal",
    }
)
PATH_TOOLS = frozenset(
    {
        "read",
        "read_file",
        "write",
        "write_file",
        "create_file",
        "edit",
        "multiedit",
        "edit_file",
        "replace",
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "view",
        "ls",
        "list_directory",
        "list_dir",
        "notebookedit",
        "notebook_edit",
        "read_many_files",
    }
)
SEARCH_TOOLS = frozenset(
    {"grep", "glob", "search_file_content", "search", "find", "find_files", "rg", "ripgrep"}
)
COMMAND_KEYS = ("command", "cmd")
PATH_KEYS = ("file_path", "path", "absolute_path", "notebook_path", "filename", "dir_path")
PATTERN_KEYS = ("pattern", "query", "regex")
EDIT_PAIRS = (("old_string", "new_string"), ("old_str", "new_str"))
NEW_FILE_KEYS = ("content", "file_text")
# `bash -lc "<script>"` reads best as the script.
_SHELLS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash"})
_SHELL_FLAGS = frozenset({"-c", "-lc", "-ic", "-lic"})

# A diff of texts longer than this is shown as the old lines, then the new ones: matching
# lines is quadratic in the worst case, and a page must not wait for it.
_DIFF_LINES_MAX = 2_000
# Markup around each diff line or field (`<span class="d-add">`, `<dt>`, ...), counted
# against the budget so a view of many short lines stays within it too.
_LINE_MARKUP = 32
# Short scalar values stay on their key's line; longer or multi-line ones get a block.
_INLINE_VALUE_CHARS = 80
ONE_LINE_CHARS = 120


@dataclass(frozen=True, slots=True)
class Field:
    """One `key: value` line; *block* values are multi-line and shown as preformatted."""

    key: str
    value: str
    block: bool = False


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One line of a small diff: *op* is "-" (removed), "+" (added), " " (context), or
    "@" for the gap between two hunks (its text is empty)."""

    op: str
    text: str


@dataclass(frozen=True, slots=True)
class ArgsView:
    """A call's arguments as people read them. *kind* says which parts are set:

    - `command`: *command* (a shell command line or script);
    - `path`: *path*, and *action* for editors that take one (`view`, `create`);
    - `edit`: *path* and *diff*; `search`: *pattern* and *path*;
    - `inspect`: *blob_id* and *selector* (blobviewer's own tool);
    - `fields`: only *fields*; `text`: *text* (arguments recorded as a non-JSON string);
    - `none`: no arguments at all.

    *fields* also carries the keys the main part does not show (a command's description,
    a read's offset). *more_bytes* is how many bytes of the values were left out.
    """

    kind: str
    command: str = ""
    path: str = ""
    action: str = ""
    pattern: str = ""
    blob_id: str = ""
    selector: str = ""
    text: str = ""
    diff: tuple[DiffLine, ...] = ()
    fields: tuple[Field, ...] = ()
    more_bytes: int = 0

    @property
    def added(self) -> int:
        return sum(1 for line in self.diff if line.op == "+")

    @property
    def removed(self) -> int:
        return sum(1 for line in self.diff if line.op == "-")


def decoded_arguments(arguments: Any) -> Any:
    """The arguments as a JSON value: clients that record them as a JSON string get it
    parsed; a string that is not JSON stays a string."""
    if isinstance(arguments, str):
        stripped = arguments.strip()
        if stripped[:1] in ("{", "["):
            try:
                return json.loads(stripped)
            except (ValueError, RecursionError):
                return arguments
    return arguments


def arguments_view(tool: str, arguments: Any, *, budget: int | None = None) -> ArgsView:
    """*arguments* of a call to *tool*, laid out for reading; cut to about *budget* bytes
    of escaped text when a budget is given (see the module docstring)."""
    return _view(tool, arguments, budget)


def _view(tool: str, arguments: Any, budget: int | None, *, for_title: bool = False) -> ArgsView:
    """arguments_view. *for_title*: only what one_line reads is filled in (kind, path,
    action, command, pattern, blob id, selector): an edit's diff and the other fields,
    which come last and cost the most, are left empty."""
    cut = _TitleBudget(budget) if for_title else _Budget(budget)
    args = decoded_arguments(arguments)
    name = tool.strip().casefold()
    if args is None or args == {} or args == "" or args == []:
        return ArgsView("none")
    if not isinstance(args, dict):
        if isinstance(args, str):
            text = cut.take(args)
            return ArgsView("text", text=text, more_bytes=cut.left_out)
        return ArgsView("fields", fields=cut.fields([("arguments", args)]), more_bytes=cut.left_out)

    if name == "inspect" and isinstance(args.get("blob_id"), str):
        selector = args.get("selector")
        rest = _without(args, ("blob_id", "selector"))
        return ArgsView(
            "inspect",
            blob_id=cut.take(args["blob_id"]),
            selector=cut.take(selector) if isinstance(selector, str) else "",
            fields=cut.fields(rest),
            more_bytes=cut.left_out,
        )

    path_key = _first_key(args, PATH_KEYS, str)
    path = cut.take(args[path_key]) if path_key else ""
    action = (
        args.get("command")
        if name in ("str_replace_editor", "str_replace_based_edit_tool")
        else None
    )
    action = action if isinstance(action, str) else ""

    diff, used = _edit_diff(args, name, action, cut)
    if diff is not None:
        rest = _without(args, (*used, path_key or "", "command" if action else ""))
        return ArgsView(
            "edit",
            path=path,
            action=action,
            diff=diff,
            fields=cut.fields(rest),
            more_bytes=cut.left_out,
        )

    if name in SHELL_TOOLS:
        key = next((k for k in COMMAND_KEYS if _command_text(args.get(k)) is not None), None)
        if key is not None:
            command = cut.take(_command_text(args[key]) or "")
            rest = _without(args, (key,))
            return ArgsView(
                "command", command=command, fields=cut.fields(rest), more_bytes=cut.left_out
            )

    if name in SEARCH_TOOLS:
        pattern_key = _first_key(args, PATTERN_KEYS, str)
        if pattern_key:
            pattern = cut.take(args[pattern_key])
            rest = _without(args, (pattern_key, path_key or ""))
            return ArgsView(
                "search",
                pattern=pattern,
                path=path,
                fields=cut.fields(rest),
                more_bytes=cut.left_out,
            )

    if name in PATH_TOOLS and path_key:
        rest = _without(args, (path_key, "command" if action else ""))
        return ArgsView(
            "path", path=path, action=action, fields=cut.fields(rest), more_bytes=cut.left_out
        )

    return ArgsView("fields", fields=cut.fields(args), more_bytes=cut.left_out)


def one_line(
    tool: str, arguments: Any, *, limit: int = ONE_LINE_CHARS, path_chars: int | None = None
) -> str:
    """The call as a short title: `Read src/app.py`, `bash: pytest -x`, `Grep TODO in
    src`, `inspect <blob> lines:1-40`; for tools this module does not know, the tool name.
    At most *limit* characters (a longer title ends with `…`). With *path_chars*, a longer
    path keeps its end (`…/tests/test_app.py`), the part that tells files apart."""
    view = _view(tool, arguments, 4 * limit, for_title=True)
    return _title(tool, view, limit=limit, path_chars=path_chars)


def _title(tool: str, view: ArgsView, *, limit: int, path_chars: int | None) -> str:
    """one_line from the view of the call's arguments."""
    tool = tool.strip() or "(unnamed tool)"
    path = _path_tail(view.path, path_chars) if path_chars else view.path
    match view.kind:
        case "command":
            title = f"{tool}: {_first_line(view.command)}"
        case "path" | "edit" if path:
            title = " ".join(part for part in (tool, view.action, path) if part)
        case "search":
            title = f"{tool} {_first_line(view.pattern)}" + (f" in {path}" if path else "")
        case "inspect":
            title = f"inspect {view.blob_id} {view.selector}".rstrip()
        case _:
            title = tool
    return title if len(title) <= limit else title[: limit - 1] + "…"


# --- the parts ------------------------------------------------------------------------------


def _edit_diff(
    args: dict[str, Any], name: str, action: str, cut: _Budget
) -> tuple[tuple[DiffLine, ...] | None, tuple[str, ...]]:
    """The diff an edit call makes, and the keys it used; (None, ()) when it is no edit."""
    for old_key, new_key in EDIT_PAIRS:
        old, new = args.get(old_key), args.get(new_key)
        if isinstance(old, str) and isinstance(new, str):
            return cut.diff(partial(_diff_lines, old, new)), (old_key, new_key)
        if isinstance(old, str) and new is None and action == "str_replace":
            # str_replace_editor without new_str deletes the old text.
            return cut.diff(partial(_diff_lines, old, "")), (old_key,)
    edits = args.get("edits")
    if isinstance(edits, list) and edits and all(isinstance(e, dict) for e in edits):
        pairs = []
        for edit in edits:
            pair = next(
                (
                    (edit[o], edit[n])
                    for o, n in EDIT_PAIRS
                    if isinstance(edit.get(o), str) and isinstance(edit.get(n), str)
                ),
                None,
            )
            if pair is None:
                return None, ()
            pairs.append(pair)
        return cut.diff(partial(_edits_lines, pairs)), ("edits",)
    creates = name in ("write", "write_file", "create_file") or action == "create"
    if creates:
        key = _first_key(args, NEW_FILE_KEYS, str)
        if key:
            text = args[key]
            return cut.diff(lambda: [DiffLine("+", line) for line in _lines(text)]), (key,)
    return None, ()


def _edits_lines(pairs: list[tuple[str, str]]) -> list[DiffLine]:
    """The diff of several edits (old, new), one after another, separated by "@" lines."""
    lines: list[DiffLine] = []
    for pair in pairs:
        if lines:
            lines.append(DiffLine("@", ""))
        lines.extend(_diff_lines(*pair))
    return lines


def _diff_lines(old: str, new: str) -> list[DiffLine]:
    """The lines that change from *old* to *new*, with one line of context around each
    change, hunks separated by "@" lines."""
    a, b = _lines(old), _lines(new)
    if len(a) + len(b) > _DIFF_LINES_MAX:
        return [DiffLine("-", line) for line in a] + [DiffLine("+", line) for line in b]
    lines: list[DiffLine] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group in matcher.get_grouped_opcodes(1):
        if lines:
            lines.append(DiffLine("@", ""))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines.extend(DiffLine(" ", line) for line in a[i1:i2])
                continue
            lines.extend(DiffLine("-", line) for line in a[i1:i2])
            lines.extend(DiffLine("+", line) for line in b[j1:j2])
    return lines


def _lines(text: str) -> list[str]:
    # The line model of the rest of the site: a trailing newline ends the last line.
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def _command_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
        if len(value) == 3 and value[0] in _SHELLS and value[1] in _SHELL_FLAGS:
            return value[2]
        return shlex.join(value)
    return None


def _first_key(args: dict[str, Any], keys: Iterable[str], kind: type) -> str | None:
    return next((key for key in keys if isinstance(args.get(key), kind) and args[key]), None)


def _without(args: dict[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    dropped = set(keys)
    return {key: value for key, value in args.items() if key not in dropped}


def _path_tail(path: str, chars: int) -> str:
    """*path*, or when longer than *chars* its last components after `…/`."""
    if len(path) <= chars:
        return path
    parts = path.rstrip("/").split("/")
    tail = parts[-1]
    for part in reversed(parts[:-1]):
        if len(part) + len(tail) + 3 > chars:
            break
        tail = f"{part}/{tail}"
    return f"…/{tail}"


def _first_line(text: str) -> str:
    first, _, rest = text.strip().partition("\n")
    return first + (" …" if rest.strip() else "")


def _value_text(value: Any) -> tuple[str, bool]:
    """A value as text, and whether it needs a block of its own."""
    if isinstance(value, str):
        return value, "\n" in value or len(value) > _INLINE_VALUE_CHARS
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value), False
    try:
        compact = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        return repr(value), False
    if len(compact) <= _INLINE_VALUE_CHARS:
        return compact, False
    return json.dumps(value, ensure_ascii=False, indent=2), True


def html_size(text: str) -> int:
    """UTF-8 bytes of *text* once escaped for HTML (as the templates escape it)."""
    return len(html.escape(text).encode("utf-8", "surrogatepass"))


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass
class _Budget:
    """Bytes of escaped text still to spend (None: no limit), and bytes left out so far."""

    limit: int | None
    left_out: int = 0
    spent: int = field(default=0)

    def take(self, text: str, *, markup: int = 0) -> str:
        """The longest prefix of *text* that fits (its markup counted too)."""
        if self.limit is None:
            return text
        room = self.limit - self.spent - markup
        cost = html_size(text)
        if cost <= room:
            self.spent += cost + markup
            return text
        shown = text
        while shown and cost > max(room, 0):  # shrinks every round; a few rounds at most
            shown = shown[: max(0, len(shown) * max(room, 0) // cost - 1)]
            cost = html_size(shown)
        self.spent = self.limit if self.limit > self.spent else self.spent
        self.left_out += _utf8(text) - _utf8(shown)
        return shown

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.spent >= self.limit

    def diff(self, make: Callable[[], list[DiffLine]]) -> tuple[DiffLine, ...]:
        """The diff lines *make* makes, as far as the budget goes."""
        lines = make()
        shown: list[DiffLine] = []
        for index, line in enumerate(lines):
            if self.exhausted:
                self.left_out += sum(_utf8(rest.text) + 1 for rest in lines[index:])
                break
            shown.append(DiffLine(line.op, self.take(line.text, markup=_LINE_MARKUP)))
        return tuple(shown)

    def fields(self, values: dict[str, Any] | list[tuple[str, Any]]) -> tuple[Field, ...]:
        items = list(values.items()) if isinstance(values, dict) else values
        shown: list[Field] = []
        for index, (key, value) in enumerate(items):
            text, block = _value_text(value)
            if self.exhausted:
                self.left_out += sum(
                    _utf8(str(k)) + _utf8(_value_text(v)[0]) for k, v in items[index:]
                )
                break
            key_text = self.take(str(key), markup=_LINE_MARKUP)
            shown.append(Field(key_text, self.take(text), block))
        return tuple(shown)


class _TitleBudget(_Budget):
    """A budget for one_line: what a title never shows (an edit's diff, the other
    fields, which come after everything a title reads) is neither made nor spent."""

    def diff(self, make: Callable[[], list[DiffLine]]) -> tuple[DiffLine, ...]:
        return ()

    def fields(self, values: dict[str, Any] | list[tuple[str, Any]]) -> tuple[Field, ...]:
        return ()


def is_blob_id(text: str) -> bool:
    """Whether *text* parses as a blob id (a UUID), so a view may link it."""
    try:
        uuid.UUID(text.strip())
    except ValueError:
        return False
    return True
