from __future__ import annotations

from switchyard._sse import SseParser, to_event


def test_messages_split_anywhere_between_chunks() -> None:
    stream = 'retry: 1000\n\n: keep-alive\n\nid: 3\nevent: process.output\ndata: {"chunk": "a\\n", "seq": 0}\r\n\r\n'
    stream += 'event: session.ended\ndata: {}\r\r\n'
    for size in (1, 2, 7, len(stream)):
        parser = SseParser()
        messages = []
        for i in range(0, len(stream), size):
            messages.extend(parser.push(stream[i : i + size]))
        assert [(m.event, m.id) for m in messages] == [("process.output", "3"), ("session.ended", None)]
        assert parser.retry_ms == 1000
        first = to_event(messages[0])
        assert (first.id, first.type, first.data) == (3, "process.output", {"chunk": "a\n", "seq": 0})


def test_multi_line_data_and_non_json() -> None:
    parser = SseParser()
    [message] = parser.push("data: one\ndata: two\n\n")
    assert message.data == "one\ntwo" and message.event == "message"
    assert to_event(message).data == {"raw": "one\ntwo"}
