"""runner_streams: the per-stream output caps, and a cell's output cut out of a kernel's stream by its tokens."""

from runner_streams import LATE_BYTES, Cap, CellStream, partial_suffix

START, END = b"<<start-7f3a>>", b"<<end-7f3a>>"


def test_cap_forwards_up_to_the_byte_cap_then_reports_the_rest_as_over():
    cap = Cap(10, 100)
    assert cap.take(b"abcdef") == (b"abcdef", False)
    assert cap.take(b"ghijkl") == (b"ghij", True)
    assert cap.capped
    assert cap.take(b"more") == (b"", True)
    assert cap.bytes == 10


def test_cap_forwards_one_line_past_the_line_cap_so_the_engine_sees_the_cut():
    cap = Cap(1 << 20, 2)
    kept, over = cap.take(b"one\ntwo\nthree\nfour\n")
    assert kept == b"one\ntwo\nthree\n"
    assert over and cap.capped


def test_cap_counts_lines_across_chunks():
    cap = Cap(1 << 20, 2)
    assert cap.take(b"one\n") == (b"one\n", False)
    assert cap.take(b"two\n") == (b"two\n", False)
    assert cap.take(b"three\nfour") == (b"three\n", True)


def test_cap_of_an_empty_chunk_once_capped_is_not_over():
    cap = Cap(1, 10)
    cap.take(b"xy")
    assert cap.take(b"") == (b"", False)


def test_partial_suffix_is_the_longest_end_that_can_begin_a_token():
    assert partial_suffix(b"output<<sta", (START, END)) == len(b"<<sta")
    assert partial_suffix(b"output<", (START, END)) == 1
    assert partial_suffix(b"output", (START, END)) == 0
    # A whole token is not a partial one (it would have been found).
    assert partial_suffix(b"x" + END, (END,)) == 0


def test_cell_stream_gives_a_cell_what_is_between_its_tokens_after_what_came_before_it():
    stream = CellStream()
    stream.begin(START, END)
    assert stream.feed(b"left over from before " + START + b"hello ") == b"left over from before hello "
    assert stream.started and not stream.done
    assert stream.feed(b"world" + END + b"printed later, ") == b"world"
    assert stream.done
    stream.reset()
    stream.feed(b"and between cells")
    stream.begin(START, END)
    assert stream.feed(START + b"next" + END) == b"printed later, and between cellsnext"


def test_cell_stream_keeps_a_bounded_amount_between_cells_and_says_what_it_dropped():
    stream = CellStream()
    stream.feed(b"x" * (LATE_BYTES + 10))
    stream.begin(START, END)
    out = stream.feed(START + END)
    assert out.startswith(b"x" * LATE_BYTES) and out.endswith(b"[10 more bytes printed between cells were dropped]\n")


def test_cell_stream_finds_tokens_split_across_reads():
    stream = CellStream()
    stream.begin(START, END)
    pieces = [b"noise<<sta", b"rt-7f3a>>ab", b"c<<end", b"-7f3a>>tail"]
    assert b"".join(stream.feed(p) for p in pieces) == b"noiseabc"  # what came before opens the cell
    assert stream.done


def test_cell_stream_holds_back_a_possible_token_start_until_it_is_not_one():
    stream = CellStream()
    stream.begin(START, END)
    stream.feed(START)
    assert stream.feed(b"a<<en") == b"a"
    assert stream.feed(b"joyed\n") == b"<<enjoyed\n"


def test_cell_stream_ends_with_no_output_when_the_end_token_comes_first():
    stream = CellStream()
    stream.begin(START, END)
    assert stream.feed(END + START + b"late") == b""
    assert stream.done and stream.started


def test_cell_stream_flush_gives_back_what_was_held_when_the_kernel_died():
    stream = CellStream()
    stream.begin(START, END)
    stream.feed(START + b"partial <<e")
    assert stream.flush() == b"<<e"
    assert stream.flush() == b""


def test_cell_stream_reset_forgets_the_cell():
    stream = CellStream()
    stream.begin(START, END)
    stream.feed(START + b"x<<")
    stream.reset()
    assert not stream.started and stream.flush() == b""
