"""A step's key: steps of two runs match when their tool and normalised arguments do
(blobviewer.compare.step_keys)."""

from __future__ import annotations

from blobviewer.compare.step_keys import step_key


def test_paths_under_the_working_folder_are_made_relative_to_it() -> None:
    one = step_key("read_file", {"path": "/repo/src/a.py"}, "/repo")
    other = step_key("read_file", {"path": "/tmp/run-2/src/a.py"}, "/tmp/run-2/")
    assert one == other
    assert '"src/a.py"' in one


def test_paths_are_made_relative_at_any_depth() -> None:
    one = step_key("edit", {"files": [{"path": "/a/x.py"}, "/a/y.py"], "n": 1}, "/a")
    other = step_key("edit", {"files": [{"path": "/b/x.py"}, "/b/y.py"], "n": 1}, "/b")
    assert one == other


def test_the_working_folder_itself_is_dot() -> None:
    assert step_key("ls", {"path": "/repo"}, "/repo") == step_key("ls", {"path": "/w"}, "/w")


def test_only_strings_that_start_under_the_folder_change() -> None:
    key = step_key("bash", {"command": "cat /repo/a.py", "path": "/repository/b"}, "/repo")
    assert "cat /repo/a.py" in key
    assert "/repository/b" in key


def test_without_a_working_folder_paths_stay_as_they_are() -> None:
    assert step_key("read", {"path": "/repo/a"}, None) != step_key("read", {"path": "/w/a"}, None)
    assert '"/repo/a"' in step_key("read", {"path": "/repo/a"}, "")


def test_whitespace_runs_are_collapsed_and_trimmed() -> None:
    one = step_key("bash", {"command": "  ls   -la\n\tsrc "}, None)
    assert one == step_key("bash", {"command": "ls -la src"}, None)


def test_the_order_of_keys_does_not_matter() -> None:
    one = step_key("grep", {"pattern": "x", "path": "src", "opts": {"b": 1, "a": 2}}, None)
    other = step_key("grep", {"opts": {"a": 2, "b": 1}, "path": "src", "pattern": "x"}, None)
    assert one == other


def test_another_tool_or_another_argument_is_another_step() -> None:
    key = step_key("read_file", {"path": "a.py"}, None)
    assert key != step_key("write_file", {"path": "a.py"}, None)
    assert key != step_key("read_file", {"path": "b.py"}, None)
    assert key != step_key("read_file", {"path": "a.py", "limit": 10}, None)


def test_values_json_cannot_write_compactly_still_make_a_key() -> None:
    big = 2**80  # orjson refuses integers beyond 64 bits
    assert str(big) in step_key("calc", {"n": big, "s": "\ud800"}, None)


def test_arguments_that_are_not_an_object_make_a_key_too() -> None:
    assert step_key("echo", "  hello   world ", None) == step_key("echo", "hello world", None)
    assert step_key("noop", None, "/repo") == "noop\nnull"
