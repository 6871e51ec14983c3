"""Cutting: the shape rules of a message list that every strategy builds with (+ `values`).

`cut_and_prune` where to cut (the store's one pair-safe rule), how prefix and tail are assembled,
tool outputs pruned, thinking unbound · `prefix` the user message that opens a compacted
conversation, kept as structure.
"""
