"""The loop: drivers that perform the core's effects (sync and async), the compacter facade and
``AgentLoop``, the tool-use loop with compaction at every safe boundary."""
