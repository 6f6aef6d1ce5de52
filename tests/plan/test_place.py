"""The place every measuring command shares (iobench.plan.place)."""

from pathlib import Path

from iobench.plan.place import PlaceValues, place_of


def test_a_data_folder_given_as_text_is_a_path():
    """On the lent GPU machine (typer 0.27.2, click 8.5.0) a path option's value was a str in ctx.params: every
    `iobench run --data-dir` there failed with "'str' object has no attribute 'exists'" before place_of made it a
    Path."""
    place = place_of(PlaceValues(data_dir="/tmp/somewhere", device="cuda"), Path("r.jsonl"))  # type: ignore[arg-type]
    assert place.data_dir == Path("/tmp/somewhere") and isinstance(place.data_dir, Path)
    assert place_of(PlaceValues(), Path("r.jsonl")).data_dir == Path("data")


def test_a_remote_option_typed_under_another_flag_is_repeated_as_typed():
    """A printed command repeats the place's object-storage options under the flags the command declared them."""
    values = PlaceValues(endpoint_url="http://127.0.0.1:9/b", flags=(("endpoint_url", "--endpoint"),))
    assert place_of(values, Path("r.jsonl")).remote_flags() == ["--endpoint", "http://127.0.0.1:9/b"]
