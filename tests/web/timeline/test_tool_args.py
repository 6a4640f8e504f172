"""The shared argument helper: each common tool's arguments read as what they are (a
command, a path, a diff, a search), anything else as `key: value` lines, and a one-line
title for each."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blobviewer.timeline.tool_args import (
    ArgsView,
    DiffLine,
    Field,
    _title,
    arguments_view,
    html_size,
    one_line,
)
from core.content import utf8_size

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("bash", {"command": "pytest -x"}),
        ("Bash", {"command": "pytest -x"}),
        ("shell", {"command": "pytest -x"}),
        ("exec_command", {"cmd": "pytest -x"}),
        ("execute_bash", {"command": "pytest -x"}),
        ("run_shell_command", {"command": "pytest -x"}),
        ("bash", '{"command": "pytest -x"}'),  # recorded as a JSON string
        ("shell", {"command": ["bash", "-lc", "pytest -x"]}),  # Codex: argv, script inside
    ],
)
def test_a_shell_call_reads_as_its_command(tool, arguments):
    view = arguments_view(tool, arguments)

    assert view.kind == "command"
    assert view.command == "pytest -x"
    assert view.fields == ()
    assert one_line(tool, arguments) == f"{tool}: pytest -x"


def test_an_argv_without_a_shell_script_is_joined_as_a_command_line():
    view = arguments_view("shell", {"command": ["ls", "-la", "my dir"]})

    assert view.command == "ls -la 'my dir'"


def test_a_commands_other_arguments_stay_as_fields_beside_it():
    view = arguments_view(
        "Bash", {"command": "git status", "description": "Show status", "timeout": 60}
    )

    assert view.command == "git status"
    assert view.fields == (Field("description", "Show status"), Field("timeout", "60"))


def test_a_multi_line_script_titles_as_its_first_line():
    assert one_line("bash", {"command": "cd src\npytest -x\n"}) == "bash: cd src …"


@pytest.mark.parametrize(
    ("tool", "arguments", "path"),
    [
        ("Read", {"file_path": "src/app.py"}, "src/app.py"),
        ("read_file", {"path": "src/app.py"}, "src/app.py"),
        ("read_file", {"absolute_path": "/repo/src/app.py"}, "/repo/src/app.py"),
        ("LS", {"path": "src"}, "src"),
    ],
)
def test_a_file_call_reads_as_its_path(tool, arguments, path):
    view = arguments_view(tool, arguments)

    assert view.kind == "path"
    assert view.path == path
    assert one_line(tool, arguments) == f"{tool} {path}"


def test_a_reads_range_stays_beside_its_path():
    view = arguments_view("Read", {"file_path": "a.py", "offset": 100, "limit": 50})

    assert view.path == "a.py"
    assert view.fields == (Field("offset", "100"), Field("limit", "50"))


def test_str_replace_editor_shows_its_command_and_path():
    arguments = {"command": "view", "path": "/repo/setup.py"}

    view = arguments_view("str_replace_editor", arguments)

    assert (view.kind, view.action, view.path, view.fields) == (
        "path",
        "view",
        "/repo/setup.py",
        (),
    )
    assert one_line("str_replace_editor", arguments) == "str_replace_editor view /repo/setup.py"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (
            "Edit",
            {"file_path": "a.py", "old_string": "x = 1\ny = 2\n", "new_string": "x = 1\ny = 3\n"},
        ),
        (
            "str_replace_editor",
            {
                "command": "str_replace",
                "path": "a.py",
                "old_str": "x = 1\ny = 2\n",
                "new_str": "x = 1\ny = 3\n",
            },
        ),
        (
            "replace",
            {"file_path": "a.py", "old_string": "x = 1\ny = 2", "new_string": "x = 1\ny = 3"},
        ),
    ],
)
def test_an_edit_reads_as_a_small_diff(tool, arguments):
    view = arguments_view(tool, arguments)

    assert view.kind == "edit"
    assert view.path == "a.py"
    assert view.diff == (DiffLine(" ", "x = 1"), DiffLine("-", "y = 2"), DiffLine("+", "y = 3"))
    assert (view.added, view.removed) == (1, 1)
    assert "old_string" not in {f.key for f in view.fields}
    assert one_line(tool, arguments).endswith("a.py")


def test_a_diff_keeps_one_line_of_context_and_marks_the_gap_between_changes():
    old = "".join(f"line {n}\n" for n in range(1, 21))
    new = old.replace("line 2\n", "line two\n").replace("line 18\n", "line eighteen\n")

    view = arguments_view("Edit", {"file_path": "f", "old_string": old, "new_string": new})

    assert [line.op for line in view.diff] == [" ", "-", "+", " ", "@", " ", "-", "+", " "]
    assert view.diff[1:3] == (DiffLine("-", "line 2"), DiffLine("+", "line two"))


def test_a_multi_edit_shows_each_edit_as_a_hunk():
    arguments = {
        "file_path": "a.py",
        "edits": [{"old_string": "a", "new_string": "b"}, {"old_string": "c", "new_string": "d"}],
    }

    view = arguments_view("MultiEdit", arguments)

    assert view.diff == (
        DiffLine("-", "a"),
        DiffLine("+", "b"),
        DiffLine("@", ""),
        DiffLine("-", "c"),
        DiffLine("+", "d"),
    )


def test_a_new_file_reads_as_added_lines():
    view = arguments_view(
        "Write", {"file_path": "hello.py", "content": "print('hi')\nprint('bye')\n"}
    )

    assert view.kind == "edit"
    assert view.diff == (DiffLine("+", "print('hi')"), DiffLine("+", "print('bye')"))
    created = arguments_view(
        "str_replace_editor", {"command": "create", "path": "x.py", "file_text": "pass\n"}
    )
    assert (created.action, created.diff) == ("create", (DiffLine("+", "pass"),))


@pytest.mark.parametrize(
    ("tool", "arguments", "title"),
    [
        ("Grep", {"pattern": "TODO", "path": "src", "output_mode": "content"}, "Grep TODO in src"),
        ("Glob", {"pattern": "**/*.py"}, "Glob **/*.py"),
        ("search_file_content", {"pattern": "def main"}, "search_file_content def main"),
    ],
)
def test_a_search_reads_as_its_pattern_and_path(tool, arguments, title):
    view = arguments_view(tool, arguments)

    assert view.kind == "search"
    assert view.pattern == arguments["pattern"]
    assert view.path == arguments.get("path", "")
    assert one_line(tool, arguments) == title


def test_an_inspect_call_shows_its_blob_and_selector():
    blob = "01900000-0000-7000-8000-000000000001"

    view = arguments_view("inspect", {"blob_id": blob, "selector": "lines:2-3"})

    assert (view.kind, view.blob_id, view.selector) == ("inspect", blob, "lines:2-3")
    assert one_line("inspect", {"blob_id": blob, "selector": "lines:2-3"}) == (
        f"inspect {blob} lines:2-3"
    )


def test_an_unknown_tool_reads_as_key_value_lines_never_as_one_line_of_json():
    arguments = {
        "query": "weather in Paris",
        "units": "metric",
        "days": 3,
        "options": {"hourly": True, "alerts": ["rain", "wind"], "note": "x" * 100},
    }

    view = arguments_view("get_forecast", arguments)

    assert view.kind == "fields"
    assert [f.key for f in view.fields] == ["query", "units", "days", "options"]
    assert view.fields[0] == Field("query", "weather in Paris")
    assert view.fields[2] == Field("days", "3")
    options = view.fields[3]
    assert options.block and options.value == json.dumps(arguments["options"], indent=2)
    assert one_line("get_forecast", arguments) == "get_forecast"


def test_a_known_tool_without_its_usual_arguments_falls_back_to_fields():
    view = arguments_view("Bash", {"script": "ls"})

    assert view.kind == "fields"
    assert view.fields == (Field("script", "ls"),)
    assert one_line("Bash", {"script": "ls"}) == "Bash"


def test_arguments_that_are_not_json_are_shown_as_recorded():
    view = arguments_view("run", "ls -la; echo {broken")

    assert (view.kind, view.text) == ("text", "ls -la; echo {broken")


def test_no_arguments_say_so():
    for empty in (None, {}, "", []):
        assert arguments_view("submit", empty).kind == "none"
    assert one_line("submit", {}) == "submit"


def test_a_long_command_is_cut_to_the_budget_and_says_how_much_is_left_out():
    command = "echo " + "x" * 5_000

    view = arguments_view("bash", {"command": command}, budget=300)

    assert command.startswith(view.command)
    assert html_size(view.command) <= 300
    assert view.more_bytes == utf8_size(command) - utf8_size(view.command)
    assert arguments_view("bash", {"command": command}).command == command  # no budget: whole


def test_a_long_diff_is_cut_by_lines_within_the_budget():
    old = "".join(f"old line {n}\n" for n in range(500))
    new = "".join(f"new line {n}\n" for n in range(500))

    view = arguments_view(
        "Edit", {"file_path": "f", "old_string": old, "new_string": new}, budget=600
    )

    assert 0 < len(view.diff) < 40
    assert view.more_bytes > 8_000
    assert all(line.op in "-+" for line in view.diff)


def test_a_title_is_one_short_line():
    title = one_line("bash", {"command": "grep -r " + "pattern " * 100})

    assert len(title) == 120 and title.endswith("…") and "\n" not in title


@given(st.text(max_size=30), json_values)
def test_any_arguments_get_a_view_and_a_title_within_the_budget(tool, arguments):
    view = arguments_view(tool, arguments, budget=500)
    title = one_line(tool, arguments)

    assert isinstance(view, ArgsView)
    assert isinstance(title, str) and len(title) <= 120
    shown = [view.command, view.path, view.pattern, view.text, view.blob_id, view.selector]
    shown += [line.text for line in view.diff]
    shown += [part for f in view.fields for part in (f.key, f.value)]
    # Each line and field carries up to 32 bytes of markup within the budget.
    assert sum(html_size(part) for part in shown) <= 500


def test_a_title_can_keep_the_end_of_a_long_path():
    arguments = {"file_path": "/home/me/src/deep-manifest/tests/test_unit.py"}

    assert one_line("Read", arguments, path_chars=24) == "Read …/tests/test_unit.py"
    assert one_line("Read", {"file_path": "a/b.py"}, path_chars=24) == "Read a/b.py"
    assert one_line("Grep", {"pattern": "x", "path": "/very/long/path/to/src"}, path_chars=12) == (
        "Grep x in …/to/src"
    )


# A title is made without the diff and fields a title never shows: the same title as the
# whole view gives, for every tool this module knows and arguments of any shape.
known_tools = st.sampled_from(
    [
        "bash",
        "exec_command",
        "Read",
        "Edit",
        "MultiEdit",
        "Write",
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "Grep",
        "glob",
        "inspect",
        "view",
        "",
        "other",
    ]
)
argument_keys = st.sampled_from(
    [
        "command",
        "cmd",
        "file_path",
        "path",
        "old_string",
        "new_string",
        "old_str",
        "new_str",
        "content",
        "file_text",
        "edits",
        "pattern",
        "query",
        "blob_id",
        "selector",
        "other",
    ]
)
argument_values = st.one_of(
    st.text(alphabet="ab \n/\t", max_size=12),
    st.lists(st.text(alphabet="ab", max_size=3), max_size=3),
    st.lists(
        st.dictionaries(
            st.sampled_from(["old_string", "new_string", "old_str", "new_str", "x"]),
            st.text(alphabet="ab\n", max_size=6),
            max_size=3,
        ),
        max_size=3,
    ),
    st.sampled_from(["create", "str_replace", "view", None, 3]),
    json_values,
)


@given(
    known_tools,
    st.dictionaries(argument_keys, argument_values, max_size=5) | json_values,
    st.integers(10, 120),
    st.none() | st.integers(5, 40),
)
def test_a_title_is_what_the_whole_view_of_the_call_titles(tool, arguments, limit, path_chars):
    whole = arguments_view(tool, arguments, budget=4 * limit)
    assert one_line(tool, arguments, limit=limit, path_chars=path_chars) == _title(
        tool, whole, limit=limit, path_chars=path_chars
    )
