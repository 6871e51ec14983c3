"""Adapters to the outside world: the anthropic SDK, the tiktoken counter, the context-window
catalog, the preserved-state hook runner and the conversion to the session store's records."""
