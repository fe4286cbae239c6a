"""HPACK decoding that remembers the literal header fields one HTTP/2 connection repeats.

Clients send some headers as literals on every request, never entered into HPACK's dynamic
table: nghttp2 and hyper-h2 mark ``authorization`` "never indexed", so a bearer token arrives
Huffman-coded on each request, and hpack decodes Huffman a nibble at a time in Python (about a
twentieth of a small GET's server CPU). A literal whose name comes from the static table means
the same header whatever the connection's state, so its encoded bytes are a key to the decoded
field; ``Decoder`` keeps the last few of one connection's and decodes each only once. The
memory is the connection's own (a token it keeps is one that connection sent, freed with it).
"""

from __future__ import annotations

from typing import Any

from hpack import hpack
from hpack import struct as hpack_struct
from hpack import table as hpack_table

KEPT = 32
"""Literals remembered per connection (a client repeats a handful: token, user agent...)."""
_STATIC = hpack_table.HeaderTable.STATIC_TABLE_LENGTH


class Decoder(hpack.Decoder):
    """hpack's decoder, with the connection's repeated literals decoded once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._literals: dict[bytes, tuple[hpack_struct.HeaderTuple, int]] = {}

    def _decode_literal(self, data: bytes | memoryview,
                        should_index: bool) -> tuple[hpack_struct.HeaderTuple, int]:
        prefix = 6 if should_index else 4
        if not data[0] & ((1 << prefix) - 1):
            return super()._decode_literal(data, should_index)  # a literal name
        index, consumed = hpack.decode_integer(data, prefix)
        if index > _STATIC:
            return super()._decode_literal(data, should_index)  # a name from the dynamic table
        length, more = hpack.decode_integer(data[consumed:], 7)
        key = bytes(data[:consumed + more + length])
        found = self._literals.get(key)
        if found is None:
            found = super()._decode_literal(data, should_index)
            if len(self._literals) < KEPT:
                self._literals[key] = found
        elif should_index:
            self.header_table.add(*found[0])
        return found


def replacing(decoder: hpack.Decoder) -> Decoder:
    """A ``Decoder`` with ``decoder``'s limits, for a connection that has decoded nothing yet."""
    memo = Decoder(max_header_list_size=decoder.max_header_list_size)
    memo.max_allowed_table_size = decoder.max_allowed_table_size
    memo.header_table_size = decoder.header_table_size
    return memo
