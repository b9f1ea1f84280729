"""Finding and normalising trace IDs in draft answers (pure logic)."""

from graph.trace_ids import find_trace_ids, normalise, rewrite_trace_ids

FULL = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_a_32_hex_id_is_found_as_is() -> None:
    assert find_trace_ids(f"see trace {FULL}.") == [FULL]


def test_upper_case_ids_are_lower_cased() -> None:
    assert find_trace_ids(f"trace {FULL.upper()}") == [FULL]


def test_a_16_hex_id_is_left_padded_to_32() -> None:
    assert find_trace_ids("trace a3ce929d0e0e4736") == ["0" * 16 + "a3ce929d0e0e4736"]


def test_a_zero_stripped_search_id_normalises_to_the_stored_id() -> None:
    stored = "00" + FULL[2:]
    assert find_trace_ids(f"trace {stored.lstrip('0')}") == [stored]


def test_repeated_ids_in_any_spelling_are_listed_once_in_order_of_use() -> None:
    text = f"{FULL} then a3ce929d0e0e4736 then {FULL.upper()}"
    assert find_trace_ids(text) == [FULL, "0" * 16 + "a3ce929d0e0e4736"]


def test_tokens_outside_16_to_32_hex_are_not_ids() -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"  # a 40-hex git commit
    assert find_trace_ids(f"commit {sha}, pod hash 5d8f7c9b4, abc123") == []


def test_ids_glued_to_other_word_characters_are_not_ids() -> None:
    assert find_trace_ids(f"x{FULL} {FULL}_suffix") == []


def test_digit_only_tokens_are_numbers_not_ids() -> None:
    assert find_trace_ids("at 1732931700000000000 ns, 1234567890123456 bytes") == []


def test_normalise_pads_and_lower_cases() -> None:
    assert normalise("ABC") == "0" * 29 + "abc"


def test_rewrite_replaces_every_spelling_of_a_target_and_counts_them() -> None:
    text = f"{FULL} and {FULL.upper()} but not a3ce929d0e0e4736"
    rewritten, count = rewrite_trace_ids(text, [FULL], lambda _: "[gone]")
    assert (rewritten, count) == ("[gone] and [gone] but not a3ce929d0e0e4736", 2)
