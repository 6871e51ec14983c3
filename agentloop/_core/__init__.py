"""The compaction core: message values and pure functions that measure, decide and transform.

Nothing here performs I/O, reads a clock, makes ids or imports the SDK, the tokenizer or the
store. What needs the outside world is yielded as an effect (see ``effects``) for a driver.
"""
