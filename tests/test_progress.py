"""Progress bars (`iobench.progress`): one figure of each kind on a line."""

from __future__ import annotations


def test_a_finished_bar_shows_one_mb_per_s():
    """prepare's finished line said its own MB/s and rich's windowed MB/s beside it: two figures on one line."""
    import time

    from rich.console import Console

    from iobench.progress import RichReporter

    console = Console(width=150, record=True, force_terminal=False)
    with RichReporter(console) as bars:
        bars.start("npy", "npy", 10**6)
        for _ in range(4):  # a few steps apart: rich has a speed to show
            bars.advance("npy", 25 * 10**4)
            time.sleep(0.02)
        bars.finish("npy", "npy  1.0 MB  0.01 s  100.0 MB/s")
    last = [line for line in console.export_text().splitlines() if line.strip()][-1]
    assert last.count("MB/s") == 1, last


def test_a_finished_bar_sets_no_data_bytes_beside_the_bytes_stored():
    """ "files 32 MB, 25 MB/s ... 75.3/75.3 MB": the bytes stored (PNG) and the bytes of data side by side, unnamed
    (issue 80): a finished line says the bytes stored, and the bar's count of data is gone."""
    from rich.console import Console

    from iobench.progress import RichReporter

    console = Console(width=150, record=True, force_terminal=False)
    with RichReporter(console) as bars:
        bars.start("files", "files write", 75_300_000)
        bars.advance("files", 75_300_000)
        bars.finish("files", "files 32.0 MB stored, 25 MB/s")
    last = [line for line in console.export_text().splitlines() if line.strip()][-1]
    assert "32.0 MB stored" in last and "75.3" not in last, last
