"""Running a plan: one run (runner, its epoch log and record), sweeps, tune's search, the session that
launches ranks, and doctor. The top of the measuring side: it imports plan, measure and loaders."""
