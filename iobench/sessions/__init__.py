"""One session per command: a frozen Request in, progress through `iobench.events.Events`, an Outcome back. The
command line parses the options into the Request and prints the Outcome; a session prints nothing."""
