"""agentloop's compaction inside other agent frameworks.

Each integration is an optional extra and a module of its own, imported only when you import
it (``import agentloop`` never loads a framework):

* :mod:`agentloop.integrations.langchain` — ``CompactionMiddleware`` for LangChain v1's
  ``create_agent`` (``pip install "agentloop[langchain]"``);
* :mod:`agentloop.integrations.pydantic_ai` — the ``Compaction`` capability for a pydantic-ai
  ``Agent`` (``pip install "agentloop[pydantic-ai]"``).

Both measure the context at every model request with the usage the framework reports, compact
with a :class:`~agentloop.ConversationCompacter` at the trigger, replace the framework's history
with the compacted one, and keep parent and child sessions in a ``sessions`` store.
"""
