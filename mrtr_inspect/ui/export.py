"""The chain opened in the view, exported as `export` would: a fixture (replay/export.py) or a
Mermaid diagram (outputs/exporters: Markdown when the path ends in .md), written by the one output
writer (recording/files.write_private)."""

from __future__ import annotations

from types import SimpleNamespace

from ..config import Config
from ..errors import UserError
from ..recording.files import named, write_private
from .store import Store


def export_chain(store: Store, seq: int, to: str, path: str, config: Config | None = None) -> list[str]:
    """Write chain `seq` as `to` (fixture or mermaid) to `path`; the lines to tell the user.
    Raises a UserError with its one-line reason."""
    cid = f"c{seq}"
    if to == "fixture":
        from ..replay.export import export_fixture

        if len(store.inputs) != 1:
            raise UserError("a fixture is exported from one recording at a time (open the view on that one)")
        return export_fixture(store.inputs[0], path, chains=(cid,), config=config).lines()
    from ..outputs.exporters import _mermaid
    from ..outputs.show import hop_story

    chain = store.chain(seq)
    hops = store.hops
    backs = []
    for h in hops or ():  # the back chains it caused (RULES.md §11), drawn with it
        if h["front"] == cid and (b := store.row(int(h["back"][1:]))) is not None:
            backs.append(store.chain(b.seq))
    if hops and not hop_story([chain, *backs], hops):  # a back chain: drawn alone
        hops = None
    text = _mermaid(SimpleNamespace(chains=[chain, *backs], hops=hops), markdown=path.endswith(".md"))
    write_private(path, text.encode("utf-8", "backslashreplace"))
    return [f"wrote {named(path)}: mermaid, chain {cid}"]
