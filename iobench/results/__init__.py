"""What a measurement leaves: typed records, their storage, statistics, warnings, tables, plots, reports."""
