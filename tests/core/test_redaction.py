"""Secrets are replaced by `[redacted:<kind>]` before anything is stored; hashes, ids and
code are left alone (docs/redaction.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.redaction import find_secrets, redact, redact_value, redaction_enabled

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
EXPECTED = REAL.parent / "real-recordings-redactions.tsv"

# One planted secret of every kind, as it shows in an output (fake: made for this test).
PLANTED = {
    "aws_access_key": "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "aws_secret_key": "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "gcp_api_key": "key=AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY&q=x",
    "azure_storage_key": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
    + "A" * 86
    + "==;EndpointSuffix=core.windows.net",
    "openai_key": "OPENAI says: sk-proj-" + "Ab3" * 20,
    "anthropic_key": "using sk-ant-api03-" + "x9Y_" * 24 + "AA",
    "github_token": "git clone https://ghp_" + "a1B2" * 9 + "@github.com/o/r",
    "gitlab_token": "PRIVATE-TOKEN header glpat-AbCdEfGhIjKlMnOpQrSt",
    "slack_token": "token xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp",
    "slack_webhook": "POST https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "stripe_key": "stripe.api_key = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'",
    "private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAAbm9uZQ==\n"
    "-----END OPENSSH PRIVATE KEY-----\nafter",
    "jwt": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "url_password": "DATABASE_URL is postgres://app:Tr0ub4dor3@db.internal:5432/app",
    "named_secret": "export DB_PASSWORD=correct-horse-9-battery",
}


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_a_planted_secret_of_every_kind_is_caught(kind):
    text = PLANTED[kind]

    redacted, kinds = redact(text)

    assert kinds == {kind: 1}, (redacted, kinds)
    assert f"[redacted:{kind}]" in redacted
    secret = text[find_secrets(text)[0].start : find_secrets(text)[0].end]
    assert len(secret) >= 8 and secret not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "blob 0192f3a4-1b2c-7d3e-8f40-123456789abc and [blob:01a237f7-f0d4-74b4-96cb-c315ee808deb]",
        "sha256 3b4f1e2d9c8a7b6e5f4d3c2b1a0998877665544332211ffeeddccbbaa00112233",
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 (HEAD -> main)",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
        '{"max_tokens": 4096, "input_tokens": 1200, "cache_key": "user-123456"}',
        "thread_key: thread_key,\n    token = request.headers.get('Authorization')",
        "env.OPENAI_API_KEY = process.env.CODEMIE_API_KEY; apiKey: apiKeyValue,",
        "DB_PASSWORD=${DB_PASSWORD}\nAPI_KEY=<your-key-here>\nSECRET_KEY=changeme",
        "git remote set-url origin https://oauth2:${GITLAB_TOKEN}@gitlab.com/x/y.git",
        "the key: payload.items selector, and key:results",
        "disk-usage task-runner sk-learn KEYBOARD monkey: bananas123",
    ],
)
def test_hashes_ids_and_code_are_left_alone(text):
    assert redact(text) == (text, {})


def test_redacted_json_text_is_still_json():
    value = {
        "output": "export GITHUB_TOKEN=ghp_" + "a1B2" * 9 + '\nsaid "done"',
        "args": {"api_key": "abc123def456ghi789", "url": "https://u:p4ssw0rd!@h/x"},
    }
    text = json.dumps(value)

    redacted, kinds = redact(text)

    assert json.loads(redacted)["args"]["api_key"] == "[redacted:named_secret]"
    assert sum(kinds.values()) == 3
    assert redact_value(value)[0] == json.loads(redacted)  # decoded or encoded, the same


def test_redaction_is_deterministic_and_idempotent():
    text = "\n".join(PLANTED.values())
    once, kinds = redact(text)

    assert redact(text) == (once, kinds)
    assert redact(once) == (once, {})
    assert sum(kinds.values()) == len(PLANTED)


def test_the_redactors_findings_on_every_real_recording_are_the_expected_ones():
    expected = sorted(
        tuple(line.split("\t"))
        for line in EXPECTED.read_text().splitlines()
        if line and not line.startswith("#")
    )
    found = []
    for path in sorted(REAL.rglob("*")):
        if path.is_file() and path.suffix in (".jsonl", ".json", ".traj"):
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), start=1):
                name = str(path.relative_to(REAL))
                found += [(name, str(number), finding.kind) for finding in find_secrets(line)]

    assert sorted(found) == expected
    assert len({name for name, _, _ in found}) >= 3  # not an empty file that trivially agrees


@pytest.mark.parametrize(
    ("setting", "on"), [("", True), ("on", True), ("off", False), ("0", False)]
)
def test_blobviewer_redact_off_turns_it_off(monkeypatch, setting, on):
    monkeypatch.setenv("BLOBVIEWER_REDACT", setting)
    assert redaction_enabled() is on


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_a_planted_secret_on_a_line_of_its_own_in_json_text_is_caught(kind):
    """In a JSON Lines line the secret follows an escaped line end (`\\n`), which is
    where a line begins, not the inside of a word."""
    text = json.dumps({"output": f"first line\n{PLANTED[kind]}\nlast line"})

    redacted, kinds = redact(text)

    assert kinds == {kind: 1}
    assert json.loads(redacted)["output"] == redact(f"first line\n{PLANTED[kind]}\nlast line")[0]


def test_overlapping_secrets_are_redacted_as_one_and_nothing_of_either_is_left():
    text = "SSH_PRIVATE_KEY=base64:" + PLANTED["private_key"]

    redacted, _ = redact(text)

    assert "b3BlbnNzaC1rZXktdjEAAAAA" not in redacted and redacted.endswith("\nafter")
    assert redact(redacted)[0] == redacted


@pytest.mark.parametrize(
    "text",
    [
        '{"TOKEN_TTL":-86400000,"x":1}',
        "PWD=/home/alice/projects/blobviewer\nTOKEN_URL=https://oauth2.googleapis.com/token",
        "SSH_KEY_PATH=~/.ssh/id_ed25519 GOOGLE_APPLICATION_CREDENTIALS_FILE=/home/a/sa.json",
    ],
)
def test_numbers_paths_and_urls_named_like_secrets_are_left_alone(text):
    assert redact(text) == (text, {})


def test_a_text_with_a_lone_surrogate_is_redacted_too():
    """JSON may escape a lone surrogate (`"\\ud800"`), and such a text is no UTF-8."""
    text = "out \ud800 key " + PLANTED["openai_key"]
    redacted, kinds = redact(text)
    assert redacted == "out \ud800 key OPENAI says: [redacted:openai_key]"
    assert kinds == {"openai_key": 1}
