"""kernel_display.py (and kernel_node.js's display): rich results of kernel cells, through the real runner."""

import base64
import struct

from test_runner_kernels import start_kernel

PNG_CODE = """
import struct, zlib
def png(w, h):
    def chunk(kind, body):
        return struct.pack('>I', len(body)) + kind + body + struct.pack('>I', zlib.crc32(kind + body))
    rows = b''.join(b'\\x00' + b'\\xff\\x00\\x00' * w for _ in range(h))
    return (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
            + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b''))
class Chart:
    def __init__(self, w, h): self.w, self.h = w, h
    def _repr_png_(self): return png(self.w, self.h)
    def _repr_html_(self): return '<b>chart %dx%d</b>' % (self.w, self.h)
    def __repr__(self): return 'Chart(%d, %d)' % (self.w, self.h)
"""


def results_of(runner, request_id):
    """The `display` events of a cell, in order (taken off the backlog)."""
    mine = [m for m in runner.backlog if m.get("ev") == "display" and m.get("id") == request_id]
    runner.backlog = [m for m in runner.backlog if m not in mine]
    return [m["result"] for m in mine]


def run(runner, kernel, code, **fields):
    fields.setdefault("timeoutMs", 10000)
    request_id = runner.request("cell", kernel=kernel, code=code, env={}, **fields)
    done = runner.reply(request_id, "cell_done")
    return done, results_of(runner, request_id)


def test_display_and_repr_methods_give_mime_bundles_in_order_and_the_last_value_is_the_main_result(runner):
    start_kernel(runner, "k1", "python")
    done, results = run(runner, "k1", PNG_CODE)
    assert done["ok"] and results == []
    done, results = run(runner, "k1", "display(Chart(3, 2))\nprint('between')\ndisplay('text')\nChart(5, 4)")
    assert done["ok"] and done["result"] == "Chart(5, 4)"
    assert [sorted(r["data"]) for r in results] == [
        ["image/png", "text/html", "text/plain"],
        ["text/plain"],
        ["image/png", "text/html", "text/plain"],
    ]
    first, second, main = results
    png = base64.b64decode(first["data"]["image/png"])
    assert png.startswith(b"\x89PNG") and first["metadata"]["image/png"] == {"width": 3, "height": 2}
    assert first["data"]["text/html"] == "<b>chart 3x2</b>" and first["data"]["text/plain"] == "Chart(3, 2)"
    assert "isMainResult" not in first and second["data"]["text/plain"] == "'text'"
    assert main["isMainResult"] is True and main["metadata"]["image/png"] == {"width": 5, "height": 4}


def test_a_plain_value_is_a_text_only_main_result_and_a_statement_gives_none(runner):
    start_kernel(runner, "k1", "python")
    _, results = run(runner, "k1", "40 + 2")
    assert results == [{"data": {"text/plain": "42"}, "isMainResult": True}]
    _, results = run(runner, "k1", "x = 1")
    assert results == []


def test_raw_bundles_json_and_include_exclude(runner):
    start_kernel(runner, "k1", "python")
    code = (
        "display({'application/json': {'a': [1, 2]}, 'text/plain': 'a'}, raw=True)\n"
        "class M:\n"
        "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
        "        return {'text/markdown': '# T', 'text/latex': '$x$'}, {'text/markdown': {'k': 1}}\n"
        "display(M(), exclude=['text/latex'])"
    )
    done, results = run(runner, "k1", code)
    assert done["ok"], done
    assert results[0]["data"] == {"application/json": {"a": [1, 2]}, "text/plain": "a"}
    assert sorted(results[1]["data"]) == ["text/markdown", "text/plain"]
    assert results[1]["metadata"] == {"text/markdown": {"k": 1}}


def test_a_failing_repr_method_costs_that_type_only(runner):
    start_kernel(runner, "k1", "python")
    code = "class B:\n    def _repr_html_(self): raise RuntimeError('no')\n    def __repr__(self): return 'B()'\nB()"
    request_id = runner.request("cell", kernel="k1", code=code, env={}, timeoutMs=10000)
    done = runner.reply(request_id, "cell_done")
    assert done["ok"] and done["result"] == "B()"
    assert results_of(runner, request_id) == [{"data": {"text/plain": "B()"}, "isMainResult": True}]
    assert b"B._repr_html_ failed: RuntimeError('no')" in runner.output(request_id, 2)


def test_results_over_the_caps_are_written_to_the_workspace_never_cut(runner, workspace):
    start_kernel(runner, "k1", "python")
    run(runner, "k1", PNG_CODE)
    done, results = run(
        runner, "k1", "display(Chart(300, 300))\ndisplay('small')", results={"maxBytes": 500, "cellMaxBytes": 100000}
    )
    assert done["ok"], done
    big, small = results
    assert "image/png" not in big["data"]
    [png_file] = [f for f in big["files"] if f["mimeType"] == "image/png"]
    written = (workspace / png_file["path"]).read_bytes()
    assert png_file["path"].startswith(".switchyard/results/") and written.startswith(b"\x89PNG")
    assert len(written) == png_file["bytes"]
    assert small["data"] == {"text/plain": "'small'"} and "files" not in small
    # The cell's total: once it is spent, later results go to files too.
    done, results = run(
        runner, "k1", "for _ in range(3): display('x' * 400)", results={"maxBytes": 1000, "cellMaxBytes": 1000}
    )
    assert ["files" in r for r in results] == [False, False, True]
    spilled = results[2]
    assert spilled["files"][0]["bytes"] == 402 and "written to .switchyard/results/" in spilled["data"]["text/plain"]
    assert (workspace / spilled["files"][0]["path"]).read_text() == "'" + "x" * 400 + "'"


def test_a_node_cell_displays_with_a_mime_type_and_its_last_value_is_the_main_result(runner):
    start_kernel(runner, "n1", "node")
    png = base64.b64encode(
        b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", 7, 9) + b"\x08\x02\x00\x00\x00"
    ).decode()
    code = (
        f"display(Buffer.from('{png}', 'base64'), 'image/png');\n"
        "display('<i>x</i>', 'text/html');\n"
        "display({a: 1}, 'application/json');\n"
        "display([1, 2]);\n"
        "6 * 7"
    )
    done, results = run(runner, "n1", code)
    assert done["ok"], done
    assert results[0]["data"]["image/png"] == png and results[0]["metadata"]["image/png"] == {"width": 7, "height": 9}
    assert results[1]["data"] == {"text/html": "<i>x</i>", "text/plain": "<i>x</i>"}
    assert results[2]["data"] == {"application/json": {"a": 1}, "text/plain": "{ a: 1 }"}
    assert results[3]["data"] == {"text/plain": "[ 1, 2 ]"}
    assert results[4] == {"data": {"text/plain": "42"}, "isMainResult": True}
    done, _ = run(runner, "n1", "display(1, 'not a mime')")
    assert done["ok"] is False and "MIME type" in done["error"]["message"]


def test_a_bash_cell_has_no_rich_results(runner):
    start_kernel(runner, "b1", "bash")
    done, results = run(runner, "b1", "echo hi")
    assert done["ok"] and results == []
