"""docs/mcp.md, "Configure your agent": every configuration snippet (Claude Code's
`claude mcp add` and `.mcp.json`, Codex CLI's config.toml, Gemini CLI's settings.json)
starts a command that answers the MCP handshake and lists the wrapped filesystem
server's tools with `inspect`.

The snippets name `/path/to/blobviewer` (this checkout), `/path/to/project` (the folder
the agent may read) and a token from the environment; the test puts real ones in their
place, and the data folder in a temporary directory, never this checkout's.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Configure your agent"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
TOKEN = "bv_a-token-from-the-environment"


@dataclass(frozen=True)
class Launch:
    """A command an agent would start, as a snippet names it."""

    where: str
    command: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)


def section() -> str:
    text = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end != -1 else len(text)]


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(section()) if lang == language]


def from_claude_mcp_add(block: str) -> list[Launch]:
    """`claude mcp add [options] <name> -- <command> [args...]`: options before `--`."""
    launches = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words[:3] != ["claude", "mcp", "add"]:
            continue
        cut = words.index("--")
        options, command = words[3:cut], words[cut + 1 :]
        env = {}
        for flag, value in zip(options, options[1:], strict=False):
            if flag in ("--env", "-e"):
                key, _, val = value.partition("=")
                env[key] = val
        launches.append(Launch("claude mcp add", command[0], command[1:], env))
    return launches


def from_mcp_servers(servers: dict[str, Any], where: str) -> list[Launch]:
    return [
        Launch(f"{where} {name}", s["command"], list(s.get("args", [])), dict(s.get("env", {})))
        for name, s in servers.items()
    ]


def launches() -> list[Launch]:
    found = []
    for block in blocks("sh"):
        found += from_claude_mcp_add(block)
    for block in blocks("json"):
        found += from_mcp_servers(json.loads(block)["mcpServers"], "json mcpServers")
    for block in blocks("toml"):
        found += from_mcp_servers(tomllib.loads(block)["mcp_servers"], "toml mcp_servers")
    return found


def test_the_section_configures_each_agent_and_downloads_nothing_unpinned():
    where = [launch.where for launch in launches()]
    assert where == [
        "claude mcp add",
        "json mcpServers files",  # Claude Code's .mcp.json
        "json mcpServers files",  # Gemini CLI's settings.json
        "json mcpServers files",  # .mcp.json with --upload
        "toml mcp_servers files",  # Codex CLI
    ]
    for launch in launches():
        assert launch.args[:4] == ["-m", "core", "mcp", "proxy"]
        assert "npx" not in [launch.command, *launch.args]
    for _, body in FENCE.findall(section()):
        assert "npx" not in body


def localized(value: str, *, data: Path, project: Path) -> str:
    value = value.replace("/path/to/blobviewer/data", str(data))
    value = value.replace("/path/to/blobviewer", str(REPO))
    value = value.replace("/path/to/project", str(project))
    value = value.replace("https://blobviewer.example.com", "http://127.0.0.1:9")
    # What each agent does with a variable from its own environment.
    return value.replace("${BLOBVIEWER_TOKEN}", TOKEN).replace("$BLOBVIEWER_TOKEN", TOKEN)


async def tools_of(launch: Launch, errlog: Path) -> list[str]:
    params = StdioServerParameters(command=launch.command, args=launch.args, env=launch.env)
    with errlog.open("w") as err, anyio.fail_after(60):
        async with Client(stdio_client(params, errlog=err)) as client:
            return [tool.name for tool in (await client.list_tools()).tools]


@pytest.mark.parametrize("index", range(len(launches())))
def test_each_snippet_starts_a_proxy_that_answers_the_handshake(index, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    data = tmp_path / "data"

    def local(value: str) -> str:
        return localized(value, data=data, project=project)

    snippet = launches()[index]
    launch = Launch(
        snippet.where,
        local(snippet.command),
        [local(arg) for arg in snippet.args],
        {key: local(value) for key, value in snippet.env.items()},
    )

    errlog = tmp_path / "stderr"
    try:
        names = anyio.run(tools_of, launch, errlog)
    except Exception as error:
        pytest.fail(f"{snippet.where}: {error!r}\n{errlog.read_text()}")

    assert "inspect" in names
    assert "read_text_file" in names
