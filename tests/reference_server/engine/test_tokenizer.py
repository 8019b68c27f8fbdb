"""Byte-level tokenizer and the streaming decoder."""

from reference_server.engine.tokenizer import ByteTokenizer, IncrementalDecoder


def test_round_trip_is_exact_for_any_unicode():
    tok = ByteTokenizer()
    text = "héllo, 世界 🚀\n"
    ids = tok.encode(text)
    assert ids == list(text.encode("utf-8"))
    assert tok.decode(ids) == text


def test_special_ids_follow_the_bytes_and_are_dropped_on_decode():
    tok = ByteTokenizer()
    assert tok.vocab_size == 264
    assert {tok.bos_id, tok.eos_id, tok.pad_id} <= set(range(256, 264))
    assert len({tok.bos_id, tok.eos_id, tok.pad_id}) == 3
    assert tok.encode("a", add_bos=True) == [tok.bos_id, 97]
    assert tok.decode([tok.bos_id, 104, 105, tok.eos_id]) == "hi"
    assert tok.is_special(tok.eos_id) and not tok.is_special(255)


def test_invalid_utf8_becomes_replacement_char():
    assert ByteTokenizer().decode([0xFF, 97]) == "\ufffda"


def test_incremental_decoder_never_splits_a_multibyte_char():
    text = "a€🚀b"
    ids = list(text.encode("utf-8"))
    dec = IncrementalDecoder()
    pieces = [dec.feed([i]) for i in ids]
    assert "".join(pieces) == text
    assert pieces[1] == pieces[2] == "" and pieces[3] == "€"   # 3-byte euro held until complete
    assert all("\ufffd" not in p for p in pieces)


def test_incremental_decoder_flush_reports_a_dangling_partial_char():
    dec = IncrementalDecoder()
    assert dec.feed([0xE2, 0x82]) == ""
    assert dec.flush() == "\ufffd"
