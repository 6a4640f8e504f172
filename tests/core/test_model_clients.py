"""Model clients: the OpenAI-compatible client against recorded responses, and the script."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.agent.history import AssistantMessage, ToolCall, ToolResult, UserMessage
from core.agent.model_clients import (
    ModelClient,
    ModelError,
    OpenAIChatClient,
    ScriptedClient,
    call,
    chat_messages,
)
from core.agent.tools import tool
from core.agent.worker import Worker

DATA = Path(__file__).parent / "data"


def recorded(name: str, status: int = 200) -> httpx.Response:
    return httpx.Response(status, content=(DATA / name).read_bytes())


@tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: relative to the project root
    """
    return f"contents of {path}"


def client_answering(
    *responses: httpx.Response | Callable[[httpx.Request], httpx.Response],
    environ: dict[str, str] | None = None,
    **options: Any,
) -> tuple[OpenAIChatClient, list[httpx.Request]]:
    """A client whose endpoint answers *responses* in order, and the requests it got."""
    requests: list[httpx.Request] = []
    pending = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        answer = pending.pop(0)
        return answer(request) if callable(answer) else answer

    env = {"OPENAI_BASE_URL": "http://llm.test/v1", "BLOBVIEWER_MODEL": "gpt-4o-mini"}
    client = OpenAIChatClient(
        environ=env if environ is None else environ,
        transport=httpx.MockTransport(handler),
        **options,
    )
    return client, requests


def complete(client: ModelClient, history: list[Any], tools: list[Any] | None = None) -> Any:
    return asyncio.run(client.complete(history, tools or [], system=None))


# -- the request ------------------------------------------------------------------------------


def test_it_posts_to_chat_completions_under_the_base_url_with_the_key() -> None:
    client, requests = client_answering(
        recorded("chat_completion_text.json"),
        environ={
            "OPENAI_BASE_URL": "http://localhost:11434/v1/",
            "OPENAI_API_KEY": "sk-test",
            "BLOBVIEWER_MODEL": "qwen2.5-coder:7b",
        },
    )
    complete(client, [UserMessage("hi")])
    request = requests[0]
    assert request.method == "POST"
    assert str(request.url) == "http://localhost:11434/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert json.loads(request.content)["model"] == "qwen2.5-coder:7b"


def test_arguments_win_over_the_environment() -> None:
    client, requests = client_answering(
        recorded("chat_completion_text.json"),
        environ={"OPENAI_API_KEY": "from-env", "BLOBVIEWER_MODEL": "env-model"},
        model="arg-model",
        base_url="http://other.test/v1",
        api_key="from-arg",
    )
    complete(client, [UserMessage("hi")])
    assert str(requests[0].url) == "http://other.test/v1/chat/completions"
    assert requests[0].headers["authorization"] == "Bearer from-arg"
    assert json.loads(requests[0].content)["model"] == "arg-model"


def test_without_a_key_it_sends_no_authorization_header() -> None:
    client, requests = client_answering(recorded("chat_completion_text.json"))
    complete(client, [UserMessage("hi")])
    assert "authorization" not in requests[0].headers


def test_without_a_model_it_says_how_to_name_one() -> None:
    with pytest.raises(ValueError, match="BLOBVIEWER_MODEL"):
        OpenAIChatClient(environ={})


def test_it_defaults_to_openai() -> None:
    client = OpenAIChatClient("gpt-4o-mini", environ={})
    assert client.url == "https://api.openai.com/v1/chat/completions"


def test_it_maps_the_history_to_chat_messages() -> None:
    history = [
        UserMessage("What is in requirements.txt?"),
        AssistantMessage("Reading it.", (ToolCall("call_1", "read_file", {"path": "r.txt"}),)),
        ToolResult("call_1", "read_file", "Django==5.2"),
        AssistantMessage("", (ToolCall("call_2", "read_file", {"path": "../x"}),)),
        ToolResult("call_2", "read_file", "'../x' is outside the root", is_error=True),
    ]
    assert chat_messages(history, "Be brief.") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is in requirements.txt?"},
        {
            "role": "assistant",
            "content": "Reading it.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "r.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Django==5.2"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "../x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: '../x' is outside the root"},
    ]


def test_arguments_that_were_not_json_are_sent_back_as_the_model_wrote_them() -> None:
    history = [AssistantMessage("", (ToolCall("c", "read_file", '{"path": "x"'),))]
    sent = chat_messages(history)[0]["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"path": "x"'


def test_it_sends_tools_as_functions_with_their_schema() -> None:
    client, requests = client_answering(recorded("chat_completion_text.json"))
    complete(client, [UserMessage("hi")], [read_file])
    assert json.loads(requests[0].content)["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "relative to the project root"}
                    },
                    "required": ["path"],
                    "additionalProperties": False,
                },
            },
        }
    ]


def test_without_tools_it_sends_no_tools_key() -> None:
    client, requests = client_answering(recorded("chat_completion_text.json"))
    complete(client, [UserMessage("hi")])
    assert "tools" not in json.loads(requests[0].content)


# -- the response -----------------------------------------------------------------------------


def test_it_reads_a_text_answer() -> None:
    client, _ = client_answering(recorded("chat_completion_text.json"))
    reply = complete(client, [UserMessage("hi")])
    assert reply == AssistantMessage("The project uses Django 5.2; requirements.txt pins it.")


def test_it_reads_two_tool_calls_with_their_arguments_parsed() -> None:
    client, _ = client_answering(recorded("chat_completion_two_tool_calls.json"))
    reply = complete(client, [UserMessage("hi")])
    assert reply == AssistantMessage(
        "",
        (
            ToolCall("call_Qx7bV2nK9mLpR4sT1uWyZ3aB", "read_file", {"path": "requirements.txt"}),
            ToolCall("call_Hc5dF8gJ0kMnP2qS6tVxY9zE", "grep", {"pattern": "^def ", "path": "core"}),
        ),
    )


def test_it_keeps_arguments_that_are_not_json_as_the_raw_text() -> None:
    client, _ = client_answering(recorded("chat_completion_bad_arguments.json"))
    reply = complete(client, [UserMessage("hi")])
    assert reply.tool_calls == (
        ToolCall("call_k2r8w1ze", "read_file", '{"path": "core/summary.py"'),
    )


def test_empty_arguments_mean_no_arguments() -> None:
    body = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "t", "arguments": ""}}
                    ],
                }
            }
        ]
    }
    client, _ = client_answering(httpx.Response(200, json=body))
    assert complete(client, [UserMessage("hi")]).tool_calls == (ToolCall("c1", "t", {}),)


def test_a_tool_call_without_an_id_gets_a_unique_one() -> None:
    function = {"name": "t", "arguments": "{}"}
    message = {"role": "assistant", "tool_calls": [{"function": function}, {"function": function}]}
    client, _ = client_answering(httpx.Response(200, json={"choices": [{"message": message}]}))
    first, second = complete(client, [UserMessage("hi")]).tool_calls
    assert first.id.startswith("call_") and second.id.startswith("call_")
    assert first.id != second.id


# -- errors -----------------------------------------------------------------------------------


def test_an_http_500_is_a_model_error_with_the_status_and_the_body() -> None:
    client, _ = client_answering(recorded("chat_error_500.json", status=500))
    with pytest.raises(ModelError) as caught:
        complete(client, [UserMessage("hi")])
    assert caught.value.status == 500
    message = str(caught.value)
    assert message.startswith("http://llm.test/v1/chat/completions answered HTTP 500: ")
    assert "The server had an error while processing your request" in message
    assert "\n" not in message


def test_a_401_says_to_check_the_key_and_shows_the_servers_message() -> None:
    client, _ = client_answering(recorded("chat_error_401.json", status=401))
    with pytest.raises(ModelError) as caught:
        complete(client, [UserMessage("hi")])
    assert caught.value.status == 401
    message = str(caught.value)
    assert "answered HTTP 401 (check OPENAI_API_KEY): Incorrect API key provided: " in message
    assert message.endswith("(invalid_api_key)")


def test_a_long_error_body_is_cut_to_an_excerpt() -> None:
    client, _ = client_answering(httpx.Response(502, text="<html>" + "x" * 5000 + "</html>"))
    with pytest.raises(ModelError) as caught:
        complete(client, [UserMessage("hi")])
    assert len(str(caught.value)) < 300
    assert str(caught.value).endswith("…")


def test_a_timeout_is_a_model_error_that_names_the_wait() -> None:
    def time_out(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    client, _ = client_answering(time_out, timeout=30)
    with pytest.raises(ModelError, match=r"did not answer within 30s") as caught:
        complete(client, [UserMessage("hi")])
    assert caught.value.status is None


def test_an_unreachable_server_is_a_model_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    client, _ = client_answering(refuse)
    with pytest.raises(ModelError, match=r"cannot reach http://llm.test/v1/chat/completions"):
        complete(client, [UserMessage("hi")])


def test_a_body_that_is_not_json_is_a_model_error_with_an_excerpt() -> None:
    client, _ = client_answering(recorded("chat_completion_malformed.txt"))
    with pytest.raises(ModelError, match=r"not JSON: \{\"id\": \"chatcmpl-AZ3fX\""):
        complete(client, [UserMessage("hi")])


def test_json_without_choices_is_a_model_error() -> None:
    client, _ = client_answering(httpx.Response(200, json={"object": "list", "data": []}))
    with pytest.raises(ModelError, match=r"without choices\[0\]\.message"):
        complete(client, [UserMessage("hi")])


# -- with the Worker ---------------------------------------------------------------------------


def test_a_worker_runs_two_tool_calls_from_the_endpoint_and_sends_their_results() -> None:
    @tool
    def grep(pattern: str, path: str = ".") -> str:
        """Search files."""
        return f"core/x.py:1: def {pattern}"

    client, requests = client_answering(
        recorded("chat_completion_two_tool_calls.json"), recorded("chat_completion_text.json")
    )
    result = asyncio.run(Worker(client, [read_file, grep]).run("Which framework?"))
    assert result.text == "The project uses Django 5.2; requirements.txt pins it."
    second = json.loads(requests[1].content)["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assert second[2] == {
        "role": "tool",
        "tool_call_id": "call_Qx7bV2nK9mLpR4sT1uWyZ3aB",
        "content": "contents of requirements.txt",
    }
    assert second[3]["tool_call_id"] == "call_Hc5dF8gJ0kMnP2qS6tVxY9zE"


def test_a_worker_answers_unparsable_arguments_with_an_invalid_arguments_error() -> None:
    client, _ = client_answering(
        recorded("chat_completion_bad_arguments.json"), recorded("chat_completion_text.json")
    )
    result = asyncio.run(Worker(client, [read_file]).run("Read core/summary.py"))
    error = result.items[2]
    assert isinstance(error, ToolResult) and error.is_error
    assert error.output == (
        "invalid arguments for read_file: arguments are not a JSON object: "
        '{"path": "core/summary.py"'
    )


# -- the scripted client ------------------------------------------------------------------------


def test_the_script_replays_its_turns_in_order_and_numbers_the_calls() -> None:
    client = ScriptedClient(
        [
            AssistantMessage("", (call("read_file", path="a"), call("read_file", path="b"))),
            AssistantMessage("", (call("read_file", path="c"),)),
            AssistantMessage("done"),
        ]
    )
    turns = [complete(client, []) for _ in range(3)]
    assert [c.id for t in turns for c in t.tool_calls] == ["call_1", "call_2", "call_3"]
    assert turns[1].tool_calls[0] == ToolCall("call_3", "read_file", {"path": "c"})
    assert turns[2] == AssistantMessage("done")


def test_a_scripted_turn_can_be_computed_from_the_history() -> None:
    client = ScriptedClient([lambda history: AssistantMessage(f"{len(history)} items so far")])
    assert complete(client, [UserMessage("a"), UserMessage("b")]).text == "2 items so far"


def test_the_script_keeps_ids_it_was_given() -> None:
    client = ScriptedClient([AssistantMessage("", (ToolCall("mine", "t", {}),))])
    assert complete(client, []).tool_calls[0].id == "mine"


def test_the_script_records_what_it_was_asked() -> None:
    client = ScriptedClient([AssistantMessage("ok")])
    asyncio.run(client.complete([UserMessage("hi")], [read_file], system="Be brief."))
    (request,) = client.requests
    assert request.history == (UserMessage("hi"),)
    assert request.tool_names == ("read_file",)
    assert request.system == "Be brief."


def test_a_script_that_runs_out_of_turns_is_a_model_error() -> None:
    client = ScriptedClient([AssistantMessage("", (call("t"),))])
    complete(client, [])
    with pytest.raises(ModelError, match="the script has 1 turns and was asked for turn 2"):
        complete(client, [])


def test_both_clients_are_model_clients() -> None:
    assert isinstance(ScriptedClient([]), ModelClient)
    assert isinstance(OpenAIChatClient("m", environ={}), ModelClient)


def test_one_client_serves_runs_in_separate_event_loops() -> None:
    client, requests = client_answering(
        recorded("chat_completion_text.json"), recorded("chat_completion_text.json")
    )
    complete(client, [UserMessage("one")])
    complete(client, [UserMessage("two")])
    assert len(requests) == 2
