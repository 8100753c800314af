"""The explorer's page-load bench (bench/explorer_pages.py) runs end to end at a small size:
every page it times answers 200 (figures are in bench/history/explorer.md, never asserted here)."""

from __future__ import annotations

from pathlib import Path

from bench.explorer_pages import main


def test_explorer_bench_measures_every_page(tmp_path: Path) -> None:
    results = main(["--sizes", "300", "--requests", "2", "--steps", "12", "--out", str(tmp_path)])
    pages = results["300"]
    assert len(pages) == 7 and all(p["requests"] == 2 and p["bytes"] > 1000 for p in pages.values())
    assert list(tmp_path.glob("explorer-*.json"))
