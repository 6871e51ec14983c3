"""The coding agent: ``AgentLoop`` plus workspace-confined tools and state kept through
compaction (todos, recent tool calls)."""
