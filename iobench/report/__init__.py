"""What a person reads of the records: the run's tables and answer line, the verdicts of `compare`, warnings, the
what-if prediction, plots and the report with its CSV and HTML. Above `run` (the records it reads are
`iobench.results`, below every package that measures), below the command line."""
