"""The face: the ``agentloop`` command line, the REPL and terminal UI, the sessions commands and
the offline demo. It parses, calls the library and prints."""
