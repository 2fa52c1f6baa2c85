"""The pure parts of the shell sessions (slime.agentic.shell_sessions, slime.agentic.shell_host): terminal output
rendering, the bounded unread buffer, the prompt-marker and echo parsing of a pane's raw stream (cut at every
chunk boundary), head/tail truncation, argument and path validation, the tool schemas (CAMEL TerminalToolkit's
names and shape) and the dispatcher's error observations. Nothing here starts a sandbox or tmux."""

from __future__ import annotations

import asyncio
import json
import types

import pytest
from slime.agentic import shell_host as host
from slime.agentic import shell_sessions as ss
from slime.agentic.sandbox import SandboxLimits

NONCE = "abc123"


def marker(seq: int, status: int) -> bytes:
    return b"\x1b]7770;" + NONCE.encode() + f";{seq};{status}".encode() + b"\x07"


# ---------------------------------------------------------------------------------------------- rendering


def test_render_strips_escapes_and_applies_carriage_returns_and_backspaces():
    raw = b"\x1b[01;34mdir\x1b[0m  file\r\n\x1b]0;title\x07ok\r\n10%\r50%\r100%\r\nabc\b\bX\r\n\x1b(B\x1b=tail"
    assert host.render(raw) == "dir  file\nok\n100%\naX\ntail"


def test_render_replaces_invalid_utf8_and_drops_control_characters_but_tabs():
    assert host.render(b"a\xff\xfeb\x00\x07\tc\x7f\r\n") == "a\ufffd\ufffdb\tc\n"


def test_render_an_unterminated_string_sequence_loses_only_its_introducer():
    """Random bytes often hold ESC ] or ESC P with no terminator: the text after them stays."""
    assert host.render(b"\x1b]junk\nend") == "junk\nend"
    assert host.render(b"a\x1bPpayload end") == "apayload end"
    assert host.render(b"\x1b]" + b"x" * 600 + b"\x07tail") == "x" * 600 + "tail"


def test_render_overwrite_keeps_the_longer_earlier_text():
    assert host.render(b"abcdef\rxy") == "xycdef"


# ---------------------------------------------------------------------------------------------- buffers


def test_unread_keeps_head_and_tail_and_counts_the_rest():
    buf = host.Unread(10)
    for i in range(0, 26, 3):
        buf.feed(bytes(range(65 + i, 65 + min(i + 3, 26))))
    text, omitted, total = buf.take()
    assert (omitted, total) == (16, 26)
    assert text == "ABCDE\n[... 16 bytes of output omitted ...]\nVWXYZ"
    assert buf.take() == ("", 0, 0)  # taking empties it


def test_unread_memory_is_bounded():
    buf = host.Unread(1000)
    for _ in range(200):
        buf.feed(b"x" * 65536)
        assert len(buf.head) + len(buf.tail) <= 1000 + 2 * 500 + 2 * 65536
    assert buf.omitted == 200 * 65536 - 1000


def test_unread_raw_text_keeps_bytes_as_they_are():
    buf = host.Unread(8)
    buf.feed(b"\x1b[1mab")
    assert buf.take_raw() == "\x1b[1mab"
    buf.feed(b"0123456789")
    assert buf.take_raw() == "0123\n[... 2 bytes truncated (10 in all) ...]\n6789"


# ---------------------------------------------------------------------------------------------- the stream


def feed_in_pieces(stream: host.Stream, data: bytes, size: int) -> None:
    for i in range(0, len(data), size):
        stream.feed(data[i : i + size])


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64, 10_000])
def test_stream_takes_markers_out_and_drops_the_echo_at_any_chunk_boundary(size):
    s = host.Stream(NONCE, 10_000)
    s.expect_echo(b" __shellhost_seq=3; . /tmp/x/s1.c3")
    s.waiting_seq = 3
    raw = b"\x1b[?2004l __shellhost_seq=3; . /tmp/x/s1.c3\r\nhello\r\nworld\r\n" + marker(3, 7) + b"\x1b[?2004h"
    feed_in_pieces(s, raw, size)
    assert (s.prompts, s.last_seq, s.last_status) == (1, 3, 7)
    assert s.unread.take()[0] == "hello\nworld\n"


def test_stream_markers_of_lines_typed_before_the_command_carry_an_older_number():
    s = host.Stream(NONCE, 10_000)
    s.expect_echo(b" __shellhost_seq=5; . /f")
    s.waiting_seq = 5
    s.feed(b"bash: 1: command not found\r\n" + marker(4, 127))  # junk typed before our line
    assert (s.last_seq, s.echo_token is not None) == (4, True)  # still waiting for our echo
    s.feed(b" __shellhost_seq=5; . /f\r\nok\r\n" + marker(5, 0))
    assert (s.last_seq, s.last_status) == (5, 0)
    assert s.unread.take()[0] == "bash: 1: command not found\nok\n"


def test_stream_a_wrong_nonce_or_malformed_marker_is_output():
    s = host.Stream(NONCE, 10_000)
    s.feed(b"\x1b]7770;other;1;0\x07A" + b"\x1b]7770;" + NONCE.encode() + b";x;y\x07B\r\n")
    assert s.prompts == 0
    assert s.unread.take()[0] == "AB\n"  # rendered: the OSC sequences are escapes


def test_stream_gives_up_on_an_echo_that_never_comes_and_keeps_the_bytes():
    s = host.Stream(NONCE, 100_000)
    s.expect_echo(b"never-echoed")
    s.feed(b"y" * (host.ECHO_HOLD_MAX + 10))
    assert s.echo_token is None and s.unread.total == host.ECHO_HOLD_MAX + 10


def test_stream_finish_flushes_what_is_held():
    s = host.Stream(NONCE, 1000)
    s.feed(b"abc\x1b]7770;ab")  # could be the start of a marker
    assert s.unread.total == 3
    s.finish()
    assert s.unread.total == len(b"abc\x1b]7770;ab")


def test_marker_hold_only_for_a_possible_marker_start():
    prefix = b"\x1b]7770;n;"
    assert host._marker_start_hold(b"abc", prefix) == 3
    assert host._marker_start_hold(b"abc\x1b]77", prefix) == 3
    assert host._marker_start_hold(b"abc\x1b[0m", prefix) == 7


# ---------------------------------------------------------------------------------------------- helpers


def test_truncate_middle():
    assert ss.truncate_middle("abcdef", 6) == "abcdef"
    out = ss.truncate_middle("0123456789" * 10, 20)
    assert out.startswith("0123456789") and out.endswith("0123456789") and "[... 80 characters omitted ...]" in out


@pytest.mark.parametrize(
    "value, problem",
    [(3, "must be a string"), ("", "must not be empty"), ("  ", "must not be empty"), ("x" * 65, "longer than"), ("a\nb", "control")],
)
def test_session_id_validation(value, problem):
    with pytest.raises(ss.ToolArgumentError, match=problem):
        ss.check_session_id(value)


def test_session_id_accepts_ordinary_names():
    for name in ("main", "session 1", "bg-server", "ü"):
        assert ss.check_session_id(name) == name


@pytest.mark.parametrize(
    "path, expected",
    [("a.txt", "/app/a.txt"), ("src/../b/c.py", "/app/b/c.py"), ("/app/x/y", "/app/x/y"), ("./z", "/app/z")],
)
def test_paths_inside_the_workdir(path, expected):
    assert ss.resolve_in_workdir(path, "/app") == expected


@pytest.mark.parametrize(
    "path, problem",
    [
        ("../x", "outside"),
        ("a/../../x", "outside"),
        ("/etc/passwd", "outside"),
        ("/application/x", "outside"),
        ("/app", "outside"),
        (".", "outside"),
        ("", "empty"),
        ("a\0b", "NUL"),
        (5, "string"),
        ("dir/", "directory"),
    ],
)
def test_paths_outside_the_workdir_are_refused(path, problem):
    with pytest.raises(ss.ToolArgumentError, match=problem):
        ss.resolve_in_workdir(path, "/app")


def test_argument_checks_name_what_is_wrong():
    spec = {"id": (str, True), "block": (bool, False), "timeout": ((int, float), False)}
    assert ss._check_arguments("t", {"id": "a"}, spec) == {"id": "a"}
    assert ss._check_arguments("t", '{"id": "a", "block": false, "timeout": null}', spec) == {"id": "a", "block": False}
    cases = [
        ({}, "missing required argument 'id'"),
        ({"id": "a", "extra": 1}, "unexpected argument 'extra'"),
        ({"id": "a", "block": "false"}, "'block' must be true or false"),
        ({"id": "a", "timeout": True}, "'timeout' must be a number, got a boolean"),
        ({"id": "a", "timeout": "5"}, "'timeout' must be a number"),
        ("{not json", "not valid JSON"),
        ([1], "must be a JSON object"),
    ]
    for arguments, message in cases:
        with pytest.raises(ss.ToolArgumentError, match=message):
            ss._check_arguments("t", arguments, spec)


# ---------------------------------------------------------------------------------------------- schemas


def test_the_four_upstream_tools_with_camels_argument_names():
    schemas = ss.tool_schemas()
    assert [s["function"]["name"] for s in schemas] == list(ss.TOOL_NAMES) == [
        "shell_exec",
        "shell_view",
        "shell_write_to_process",
        "shell_write_content_to_file",
    ]
    params = {s["function"]["name"]: s["function"]["parameters"] for s in schemas}
    assert list(params["shell_exec"]["properties"]) == ["id", "command", "block", "timeout"]
    assert list(params["shell_view"]["properties"]) == ["id"]
    assert list(params["shell_write_to_process"]["properties"]) == ["id", "command"]
    assert list(params["shell_write_content_to_file"]["properties"]) == ["content", "file_path"]
    assert params["shell_exec"]["properties"]["block"]["type"] == ["boolean", "null"]
    assert params["shell_exec"]["properties"]["timeout"]["type"] == ["number", "null"]
    assert params["shell_exec"]["properties"]["command"]["type"] == "string"
    for s in schemas:  # CAMEL FunctionTool's strict shape
        f = s["function"]
        assert s["type"] == "function" and f["strict"] is True and f["description"]
        assert f["parameters"]["type"] == "object" and f["parameters"]["additionalProperties"] is False
        assert f["parameters"]["required"] == list(f["parameters"]["properties"])
        assert all(p["description"] for p in f["parameters"]["properties"].values())
    json.dumps(schemas)  # plain JSON


def test_schemas_are_copies_and_the_kill_tool_is_opt_in():
    a = ss.tool_schemas()
    a[0]["function"]["name"] = "changed"
    assert ss.tool_schemas()[0]["function"]["name"] == "shell_exec"
    names = [s["function"]["name"] for s in ss.tool_schemas(include_kill=True)]
    assert names[-1] == "shell_kill_process" and len(names) == 5


# ---------------------------------------------------------------------------------------------- dispatcher


def stub_sessions(**kwargs) -> ss.ShellSessions:
    box = types.SimpleNamespace(inner_path="/app", limits=SandboxLimits(), isolation="bwrap", uid=None)
    return ss.ShellSessions(box, **kwargs)


@pytest.mark.parametrize(
    "name, arguments, message",
    [
        ("rm_rf", {}, "[TOOL_ERROR] unknown tool: rm_rf"),
        (None, {}, "[TOOL_ERROR] unknown tool: null"),
        ("shell_exec", {"command": "ls"}, "[TOOL_ERROR] shell_exec: missing required argument 'id'"),
        ("shell_exec", {"id": "a"}, "[TOOL_ERROR] shell_exec: missing required argument 'command'"),
        ("shell_exec", {"id": "a", "command": "  "}, "[TOOL_ERROR] shell_exec: argument 'command' must not be empty"),
        ("shell_exec", {"id": "a", "command": "ls", "timeout": -1}, "[TOOL_ERROR] shell_exec: argument 'timeout' must be a positive"),
        ("shell_exec", {"id": "a", "command": "ls", "cwd": "/"}, "[TOOL_ERROR] shell_exec: unexpected argument 'cwd'"),
        ("shell_exec", {"id": 7, "command": "ls"}, "[TOOL_ERROR] shell_exec: argument 'id' must be a string"),
        ("shell_view", "{", "[TOOL_ERROR] shell_view: arguments are not valid JSON"),
        ("shell_write_to_process", {"id": "a"}, "[TOOL_ERROR] shell_write_to_process: missing required argument 'command'"),
        ("shell_write_content_to_file", {"content": "x", "file_path": "../x"}, "[TOOL_ERROR] shell_write_content_to_file: file_path '../x' is outside"),
        ("shell_write_content_to_file", {"content": 1, "file_path": "x"}, "[TOOL_ERROR] shell_write_content_to_file: argument 'content' must be a string"),
    ],
)
def test_call_tool_returns_errors_as_observations(name, arguments, message):
    out = asyncio.run(stub_sessions().call_tool(name, arguments))
    assert out.startswith(message), out


def test_call_tool_refuses_a_file_over_the_size_limit_before_any_sandbox_work():
    out = asyncio.run(stub_sessions(max_file_bytes=10).call_tool("shell_write_content_to_file", {"content": "x" * 11, "file_path": "a"}))
    assert out == "[TOOL_ERROR] shell_write_content_to_file: content is 11 bytes, more than the 10 bytes allowed"


def test_constructor_validates_its_settings():
    with pytest.raises(ValueError, match="block_timeout"):
        stub_sessions(block_timeout=0)
    with pytest.raises(ValueError, match="max_output_chars"):
        stub_sessions(max_output_chars=10)
    with pytest.raises(ValueError, match="workdir"):
        stub_sessions(workdir="relative")


def test_the_host_program_is_self_contained():
    """It runs inside the sandbox, where this repository is not mounted: stdlib imports only."""
    source = ss.host_source()
    compile(source, "shell_host.py", "exec")
    imports = [line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert "slime" not in " ".join(imports) and imports[0] == "__future__"
