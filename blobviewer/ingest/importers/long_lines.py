"""Parsing one long JSON text (a JSON Lines record of many megabytes, or a whole document)
from its file, so that it costs about its own size in memory, not several times that.

Parsed whole, a record of N bytes needs its N bytes, the parser's own copy of them and the
value it makes: three times N. Here the text is read a block at a time: every string
longer than LONG_STRING (a tool output, in practice) is decoded as it is read and grown
in place, and the rest of the record (its keys and short values, a few kilobytes) is
parsed as usual, with a marker where each long string goes. What the record holds is then
the value and a block or two, about N.

A string is grown with `text += part` on a local variable: CPython extends a string that
nothing else refers to in place (a `realloc`), where a join of the parts would need them
and the result at once. For that realloc to move pages rather than copy bytes, the block
must be one the C library mapped on its own, not part of its heap: map_large_blocks sees
to it (`manage.py ingest` calls it), which also gives a long record's memory back to the
system once it is dropped. tests/web/ingest/test_ingest_limits.py measures both.
"""

from __future__ import annotations

import ctypes
import json
import uuid
from collections.abc import Callable
from typing import Any, BinaryIO

import orjson

# How much of the file is read at once.
BLOCK = 1 << 20
# A string with more raw bytes than this is decoded as it is read, not kept in the record
# that is parsed as usual.
LONG_STRING = 64 << 10
# The longest escape JSON has: a surrogate pair, `\ud83d\ude00`.
_LONGEST_ESCAPE = 12
_BACKSLASH = 0x5C
_QUOTE = b'"'

# A record's parser: its value and whether every float in it is plain (see
# blobviewer.ingest.importers.recording.load_json_record); raises ValueError.
Parse = Callable[[bytes], tuple[Any, bool]]


def read_long_value(file: BinaryIO, length: int, parse: Parse) -> tuple[Any, bool]:
    """*parse*'s answer for the *length* bytes at *file*'s position (which it leaves after
    them), read a block at a time: strings over LONG_STRING are decoded as they are read,
    the rest goes to *parse*. Raises ValueError when the text is not JSON."""
    text = _Text(file, length)
    skeleton = bytearray()
    long_strings: dict[str, str] = {}
    token = uuid.uuid4().hex  # a marker no record holds by chance
    while text.fill():
        quote = text.block.find(_QUOTE, text.at)
        if quote < 0:
            skeleton += text.block[text.at :]
            text.at = len(text.block)
            continue
        skeleton += text.block[text.at : quote + 1]
        text.at = quote + 1
        string = _string(text)
        if isinstance(string, bytes):
            skeleton += string
            continue
        marker = f"\x00{token}:{len(long_strings)}"
        long_strings[marker] = string
        del string
        skeleton[-1:] = orjson.dumps(marker)  # the opening quote becomes the marker's
    value, plain_floats = parse(bytes(skeleton))
    del skeleton
    return (_put_back(value, long_strings) if long_strings else value), plain_floats


class _Text:
    """The bytes of one JSON text in a file: the block being read and where in it."""

    def __init__(self, file: BinaryIO, length: int) -> None:
        self.file = file
        self.left = length
        self.block = b""
        self.at = 0
        # Inside a string: whether the bytes read of it so far end in an odd run of
        # backslashes, which escapes the next byte (a quote, say).
        self.escaping = False

    def fill(self) -> bool:
        """A block with bytes left to read in it; False at the end of the text."""
        if self.at < len(self.block):
            return True
        if self.left <= 0:
            return False
        self.block = self.file.read(min(BLOCK, self.left))
        if not self.block:
            raise ValueError("the file ended early: it was cut while it was read")
        self.left -= len(self.block)
        self.at = 0
        return True

    def string_piece(self) -> tuple[bytes, bool]:
        """The bytes of the string being read up to its closing quote or the end of the
        block, and whether the quote was reached (the text is then after it)."""
        block, start = self.block, self.at
        search = start
        while (quote := block.find(_QUOTE, search)) >= 0:
            run = _backslashes_before(block, quote, start)
            odd = run % 2 == 1
            if run == quote - start and self.escaping:
                odd = not odd
            if not odd:
                self.at = quote + 1
                self.escaping = False
                return block[start:quote], True
            search = quote + 1
        piece = block[start:]
        run = _backslashes_before(block, len(block), start)
        self.escaping = (run % 2 == 1) != (self.escaping and run == len(piece))
        self.at = len(block)
        return piece, False


def _backslashes_before(block: bytes, end: int, start: int) -> int:
    """How many backslashes come right before *end* in *block*, not counting before *start*."""
    at = end
    while at > start and block[at - 1] == _BACKSLASH:
        at -= 1
    return end - at


def _string(text: _Text) -> bytes | str:
    """After an opening quote: the rest of a string no longer than LONG_STRING as it is
    written (its raw bytes and closing quote), or a longer one decoded (_long_string)."""
    pieces: list[bytes] = []
    size = 0
    while True:
        if not text.fill():
            raise ValueError("unterminated string: the text ends inside it")
        piece, closed = text.string_piece()
        pieces.append(piece)
        size += len(piece)
        if size > LONG_STRING:
            return _long_string(text, b"".join(pieces), closed)
        if closed:
            return b"".join(pieces) + _QUOTE


def _long_string(text: _Text, undecoded: bytes, closed: bool) -> str:
    """The string whose first raw bytes are *undecoded* (all of them when *closed*), the
    rest read from *text* a block at a time, decoded as it comes and grown in place (see
    the module's docstring); the text is left after its closing quote."""
    decoded = ""
    while True:
        cut = len(undecoded) if closed else _safe_cut(undecoded)
        part = _decode(undecoded[:cut])
        undecoded = undecoded[cut:]  # an escape or a character that ends in the next block
        decoded += part  # in place: see the module's docstring
        del part
        if closed:
            return decoded
        if not text.fill():
            raise ValueError("unterminated string: the text ends inside it")
        piece, closed = text.string_piece()
        undecoded += piece


def _safe_cut(data: bytes) -> int:
    """Where *data* (a string's raw bytes from the end of an escape or character on) may
    be cut with no escape, surrogate pair or UTF-8 character cut in two."""
    cut = len(data)
    first = data.find(b"\\", max(0, cut - _LONGEST_ESCAPE))
    if first >= 0:
        # The run of backslashes around it begins an escape: before it is a byte that is
        # no backslash, and no escape goes on past a backslash. Walk the escapes from
        # there (from the first one near the end: the last may be a pair's low half).
        cut = _end_of_whole_escapes(data, first - _backslashes_before(data, first, 0))
    start = cut  # the last character must be whole: its lead byte and what follows
    while start > 0 and cut - start < 4 and 0x80 <= data[start - 1] < 0xC0:
        start -= 1
    if start > 0 and data[start - 1] >= 0xC0:
        lead = data[start - 1]
        width = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if cut - (start - 1) < width:
            cut = start - 1
    return cut


def _end_of_whole_escapes(data: bytes, at: int) -> int:
    """From *at*, where an escape begins, the end of the last escape that is whole, with
    the low half of a surrogate pair if the pair's high half is there."""
    end = at
    while at < len(data):
        if data[at] != _BACKSLASH:
            at += 1
            end = at
            continue
        if at + 1 >= len(data):
            break
        if data[at + 1] != ord("u"):
            at += 2
            end = at
            continue
        if at + 6 > len(data):
            break
        if _code_unit(data[at + 2 : at + 6]) in _HIGH_HALF:
            if at + 12 > len(data):
                break  # its low half may be next: keep the two together
            low = (
                data[at + 6 : at + 8] == b"\\u" and _code_unit(data[at + 8 : at + 12]) in _LOW_HALF
            )
            at += 12 if low else 6
        else:
            at += 6
        end = at
    return end


# The halves of a surrogate pair, as the code units `\\u` escapes write.
_HIGH_HALF = range(0xD800, 0xDC00)
_LOW_HALF = range(0xDC00, 0xE000)


def _code_unit(hex_digits: bytes) -> int:
    """The number a `\\u` escape's four hex digits write (-1 if they are not hex)."""
    try:
        return int(hex_digits, 16)
    except ValueError:
        return -1


def _decode(raw: bytes) -> str:
    """The string whose raw bytes (between its quotes) are *raw*; ValueError if not JSON."""
    quoted = _QUOTE + raw + _QUOTE
    try:
        value = orjson.loads(quoted)
    except orjson.JSONDecodeError:  # lone surrogates, which json reads and orjson refuses
        value = json.loads(quoted)
    if not isinstance(value, str):
        raise ValueError("not a JSON string")
    return value


def _put_back(value: Any, long_strings: dict[str, str]) -> Any:
    """*value* with each marker (a key or a value) replaced by its long string."""
    kind = type(value)
    if kind is str:
        return long_strings.get(value, value)
    if kind is list:
        for index, item in enumerate(value):
            value[index] = _put_back(item, long_strings)
        return value
    if kind is not dict:
        return value
    if any(key in long_strings for key in value):
        return {
            long_strings.get(key, key): _put_back(item, long_strings) for key, item in value.items()
        }
    for key, item in value.items():
        value[key] = _put_back(item, long_strings)
    return value


# glibc's mallopt parameter for the size from which an allocation is mapped on its own.
_M_MMAP_THRESHOLD = -3


def map_large_blocks(threshold: int = BLOCK) -> bool:
    """Have the C library map every allocation of *threshold* bytes or more on its own,
    for the rest of the process; False where it cannot be told (not glibc).

    glibc serves smaller allocations from its heap, below a threshold that starts at
    128 KB and rises as large blocks are freed, up to 32 MB. A block in the heap that
    grows is copied when it cannot be extended where it is (for a moment, twice the
    string being read), and heap memory that is freed mostly stays with the process.
    A block mapped on its own grows by remapping its pages and is unmapped when freed.
    Setting the threshold also stops it rising."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))
