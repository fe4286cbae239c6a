"""The memoizing HPACK decoder decodes every header block exactly as hpack's own does."""

from __future__ import annotations

import hpack

from tlsserver import hpackmemo

REQUEST = [
    (b":method", b"GET"), (b":scheme", b"https"), (b":path", b"/apis/x/v1/things/a"),
    (b":authority", b"127.0.0.1:8443"), (b"user-agent", b"h2load nghttp2/1.52.0"),
    (b"x-custom", b"a literal name"),
]


def _blocks(token_of: list[bytes]) -> list[bytes]:
    encoder = hpack.Encoder()
    return [encoder.encode([*REQUEST, (b"authorization", b"Bearer " + token, True)])
            for token in token_of]


def test_every_block_decodes_as_hpack_decodes_it() -> None:
    blocks = _blocks([b"first", b"first", b"second", b"first"] * 3)
    plain, memo = hpack.Decoder(), hpackmemo.replacing(hpack.Decoder())
    for block in blocks:
        expected = plain.decode(block, raw=True)
        got = memo.decode(block, raw=True)
        assert got == expected
        assert [type(h) for h in got] == [type(h) for h in expected]  # never-indexed kept
    assert plain.header_table.dynamic_entries == memo.header_table.dynamic_entries


def test_the_limits_of_the_replaced_decoder_are_kept() -> None:
    original = hpack.Decoder(max_header_list_size=1234)
    original.max_allowed_table_size = 777
    memo = hpackmemo.replacing(original)
    assert (memo.max_header_list_size, memo.max_allowed_table_size) == (1234, 777)


def test_a_connection_keeps_a_bounded_number_of_literals() -> None:
    memo = hpackmemo.replacing(hpack.Decoder())
    for block in _blocks([b"token-%d" % n for n in range(hpackmemo.KEPT * 2)]):
        memo.decode(block)
    assert len(memo._literals) <= hpackmemo.KEPT
