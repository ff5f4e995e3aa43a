"""The JSON report's spools: items written back in blocks of whole lines, exactly as one write per item."""

from __future__ import annotations

import io
import json

from mrtr_inspect.core.findings import Finding
from mrtr_inspect.outputs.report import ReportBuilder, _Spool


def _items(n: int) -> list[dict]:
    return [{"id": f"c{i}", "text": "naïve \u2028 \"quoted\"\nline " * (i % 5), "time": 1796000000.5 + i,
             "n": i, "none": None} for i in range(n)]


def _per_item(spool: _Spool) -> str:
    """The list as written one item at a time (the writer before blocks)."""
    out, sep = [], "\n    "
    for line in spool.lines():
        out.append(sep + line[:-1].decode("utf-8"))
        sep = ",\n    "
    return "".join(out) + ("\n  " if spool.count else "")


def test_blocks_hold_whole_lines_whatever_their_size():
    spool = _Spool()
    for item in _items(300):
        spool.add(item)
    whole = b"".join(spool.lines())
    for size in (1, 7, 64, 1000, 1 << 20):
        blocks = list(spool.blocks(size))
        assert b"".join(blocks) == whole and all(b.endswith(b"\n") for b in blocks), size
    spool.close()


def test_the_list_is_written_as_one_write_per_item_would_write_it():
    for n in (0, 1, 9000):  # 9,000 items are more than the spool keeps in memory: read back from disk
        spool = _Spool()
        for item in _items(n):
            spool.add(item)
        assert spool._f._rolled == (n == 9000)
        out = io.StringIO()
        ReportBuilder._write_list(out, spool)
        assert out.getvalue() == _per_item(spool)
        spool.close()


def test_write_json_parses_back_to_the_report():
    b = ReportBuilder(["rec.jsonl"])
    for i, item in enumerate(_items(40)):
        b._chains.add(item)
        b.add_finding(Finding("chain-linked", "info", f"retry {i} ✓", 1796000000.25 + i, f"c{i}", [i, i + 1]))
    out = io.StringIO()
    b.write_json(out)
    assert json.loads(out.getvalue()) == b.to_dict()
    b.close()


def test_an_output_file_gets_the_bytes_a_text_file_gets(tmp_path):
    """To an output file of the command line the spooled lines go as the bytes they are spooled as
    (`Output.write_utf8`), the text written before and after them in its place."""
    from mrtr_inspect.recording.files import Output

    b = ReportBuilder(["rec.jsonl"])
    for i, item in enumerate(_items(3000)):  # past the spool's memory, and blocks of several items
        b.add_chain(item)
        b.add_finding(Finding("chain-linked", "info", f"retry {i} naïve \u202e", 1796000000.25 + i, f"c{i}", [i]))
    text = io.StringIO()
    b.write_json(text)
    with Output(tmp_path / "report.json") as out:
        assert out._utf8 is not None  # the way taken
        b.write_json(out)
    b.close()
    assert (tmp_path / "report.json").read_bytes() == text.getvalue().encode("utf-8")
