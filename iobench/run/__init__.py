"""Running a measurement: configuration, loaders, clocks, cache control, ceilings, ranks, sweeps."""
