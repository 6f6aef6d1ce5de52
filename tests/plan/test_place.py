"""The place every measuring command shares (iobench.plan.place)."""

from pathlib import Path

from iobench.plan.place import place_of


def test_a_data_folder_given_as_text_is_a_path():
    """On the lent GPU machine (typer 0.27.2, click 8.5.0) a path option's value was a str in ctx.params: every
    `iobench run --data-dir` there failed with "'str' object has no attribute 'exists'" before place_of made it a
    Path."""
    place = place_of({"data_dir": "/tmp/somewhere", "dataset": None, "device": "cuda"}, Path("r.jsonl"))
    assert place.data_dir == Path("/tmp/somewhere") and isinstance(place.data_dir, Path)
    assert place_of({}, Path("r.jsonl")).data_dir == Path("data")
