"""``python -m mbs_ros.cores.parameters [--check] [DOCS_DIR]``: write each node's parameter table, generated
from its table (:func:`mbs_ros.cores.parameters.markdown_table`), between the ``<!-- parameters: begin -->`` and
``<!-- parameters: end -->`` lines of ``DOCS_DIR/<role>_node.md`` (default: the source tree's docs/); ``--check``:
change nothing, exit 1 when a page is out of date (test/unit/test_parameter_tables.py checks the same)."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from mbs_ros.cores.parameters import ROLES, markdown_table, table

BLOCK = re.compile(r"(<!-- parameters: begin -->\n)(.*?)(<!-- parameters: end -->)", flags=re.S)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mbs_ros.cores.parameters", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a page is out of date")
    parser.add_argument("docs", nargs="?", type=Path, default=Path(__file__).resolve().parents[3] / "docs",
                        help="the folder of the <role>_node.md pages (default: the source tree's docs/)")
    a = parser.parse_args(sys.argv[1:] if argv is None else argv)
    check, docs = a.check, a.docs
    stale = []
    for role in ROLES:
        page = docs / f"{role}_node.md"
        try:
            text = page.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            print(f"{page}: cannot be read ({type(e).__name__})", file=sys.stderr)
            return 2
        if not BLOCK.search(text):
            print(f"{page}: no '<!-- parameters: begin -->' block", file=sys.stderr)
            return 2
        new = BLOCK.sub(lambda m: m.group(1) + markdown_table(table(role)) + m.group(3), text, count=1)
        if new != text:
            stale.append(str(page))
            if not check:
                page.write_text(new, encoding="utf-8")
    for page in stale:
        print(f"{page}: {'out of date' if check else 'rewritten'}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
