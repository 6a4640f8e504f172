"""JSON-Schema for tool arguments: built from a typed signature, and checked before a call.

Only the part of JSON-Schema that tool parameters use is supported: `type` (one name or a
list), `properties`, `required`, `additionalProperties: false`, `items` and `enum`. That is
enough to tell a model *what* it got wrong without pulling in a validator dependency.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

from core.json_values import dumps_compact, json_type
from core.wording import excerpt

__all__ = ["ArgumentsError", "check_arguments", "docstring_parts", "parameters_schema"]

_SCALARS: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


class ArgumentsError(ValueError):
    """The arguments a model sent do not fit a tool's schema; the message is one line."""


# -- building a schema from a signature -------------------------------------------------------


def parameters_schema(
    function: Callable[..., Any], *, descriptions: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The JSON-Schema object of *function*'s parameters, from its type hints.

    Raises TypeError naming the parameter when a hint is missing or has no JSON form.
    """
    descriptions = descriptions or {}
    hints = typing.get_type_hints(function)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"{function.__name__}: *{name} cannot be a tool parameter")
        if name not in hints:
            raise TypeError(f"{function.__name__}: parameter {name!r} needs a type hint")
        try:
            schema = _schema_of(hints[name])
        except TypeError as error:
            raise TypeError(f"{function.__name__}: parameter {name!r}: {error}") from None
        if name in descriptions:
            schema["description"] = descriptions[name]
        if parameter.default is parameter.empty:
            required.append(name)
        elif _is_json(parameter.default):
            schema["default"] = parameter.default
        properties[name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        result["required"] = required
    result["additionalProperties"] = False
    return result


def _schema_of(hint: Any) -> dict[str, Any]:
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if origin is Literal:
        return {"enum": list(arguments)}
    if origin in (Union, types.UnionType):
        # `X | None` is how an optional parameter is typed; its value may still be null.
        members = [member for member in arguments if member is not type(None)]
        if len(members) == 1:
            schema = _schema_of(members[0])
            if "type" in schema and len(members) < len(arguments):
                schema["type"] = [schema["type"], "null"]
            return schema
        raise TypeError(f"unions other than `X | None` have no schema: {hint}")
    if hint is list or origin is list:
        return (
            {"type": "array", "items": _schema_of(arguments[0])} if arguments else {"type": "array"}
        )
    if hint is dict or origin is dict:
        return {"type": "object"}
    if hint is Any:
        return {}
    raise TypeError(f"{hint!r} has no JSON-Schema form (use str, int, float, bool, list, dict)")


def _is_json(value: Any) -> bool:
    try:
        dumps_compact(value)
    except (TypeError, ValueError):
        return False
    return True


_SECTION = re.compile(r"^([A-Z][A-Za-z ]*):\s*$")  # Args:, Returns:, Raises:, ...
_ARGS_SECTIONS = frozenset({"Args", "Arguments", "Parameters"})
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_EXCERPT = 80  # characters of a value that an error message quotes


def docstring_parts(docstring: str | None) -> tuple[str, dict[str, str]]:
    """The description and the per-parameter texts of a Google-style docstring.

    The description is everything before the first section (`Args:`, `Returns:`, ...);
    each `name: text` line under `Args:`, with its deeper-indented continuation lines,
    describes one parameter.
    """
    description: list[str] = []
    parameters: dict[str, str] = {}
    section = ""  # "" while still in the description
    name_indent: int | None = None  # indent of the parameter names under Args:
    current = ""
    for line in inspect.cleandoc(docstring or "").splitlines():
        indent = len(line) - len(line.lstrip())
        if header := _SECTION.match(line):
            section = header.group(1)
        elif not section:
            description.append(line)
        elif section not in _ARGS_SECTIONS or not line.strip():
            continue
        elif (match := _ARG_LINE.match(line)) and indent <= (name_indent or indent):
            name_indent = indent
            current = match.group(1).lstrip("*")
            parameters[current] = match.group(3).strip()
        elif current:
            parameters[current] = f"{parameters[current]} {line.strip()}"
    return "\n".join(description).strip(), parameters


# -- checking arguments against a schema ------------------------------------------------------


def check_arguments(schema: Mapping[str, Any], arguments: Any) -> None:
    """Raise ArgumentsError listing what in *arguments* does not fit *schema*.

    Checks the object itself, required keys, unexpected keys (when the schema forbids
    them), and the type or enum of every given value, recursing into arrays and objects.
    """
    if isinstance(arguments, str):
        raise ArgumentsError(f"arguments are not a JSON object: {excerpt(arguments, _EXCERPT)}")
    if not isinstance(arguments, dict):  # tool arguments are an object, whatever the schema
        raise ArgumentsError(f"arguments must be object, got {_type_name(arguments)}")
    problems = _problems(schema, arguments, "arguments")
    if problems:
        raise ArgumentsError("; ".join(problems))


def _problems(schema: Mapping[str, Any], value: Any, where: str) -> list[str]:
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(dumps_compact(option) for option in schema["enum"])
        return [f"{where} must be one of {allowed}, got {_shown(value)}"]
    wanted = schema.get("type")
    if wanted is not None:
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        if not any(_has_type(value, name) for name in names):
            return [f"{where} must be {' or '.join(names)}, got {_type_name(value)}"]
    problems: list[str] = []
    if isinstance(value, dict):
        problems += _object_problems(schema, value, where)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            problems += _problems(schema["items"], item, f"{where}[{index}]")
    return problems


def _object_problems(schema: Mapping[str, Any], value: dict[str, Any], where: str) -> list[str]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    inside = "" if where == "arguments" else f"{where}."
    problems = [
        f"missing required {inside}{key!r}"
        for key in schema.get("required", ())
        if key not in value
    ]
    if schema.get("additionalProperties") is False:
        unexpected = [key for key in value if key not in properties]
        if unexpected:
            expected = ", ".join(properties) or "none"
            names = ", ".join(repr(f"{inside}{key}") for key in unexpected)
            problems.append(f"unexpected {names} (expected: {expected})")
    for key, item in value.items():
        if isinstance(properties.get(key), Mapping):
            problems += _problems(properties[key], item, f"{inside}{key!r}")
    return problems


def _has_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    try:
        return json_type(value) == name
    except TypeError:
        return False


def _type_name(value: Any) -> str:
    try:
        return json_type(value)
    except TypeError:
        return type(value).__name__


def _shown(value: Any) -> str:
    try:
        return excerpt(dumps_compact(value), _EXCERPT)
    except (TypeError, ValueError):
        return type(value).__name__
