"""The one judgement: whether a figure wins, ties, changed or cannot be decided, decided here from the records' raw
values (each epoch's seconds, each run's, each round's, each kill's outcome) and nowhere else. `run`, `sweep`,
`report`, `compare`, `tune` and `checkpoint` print what it returns: an `Answer`, a `Change`, a row's `Label`, the
warnings of a run, said once."""
