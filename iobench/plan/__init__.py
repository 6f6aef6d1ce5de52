"""Planning a run: the request (RunConfig), its rules and resolve() into the plan the runner executes,
the selection of loader/format pairs and the tune script. Imports measure and below."""
