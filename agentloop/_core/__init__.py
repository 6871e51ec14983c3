"""The compaction core: message values and pure functions that measure, decide and transform.

Nothing here performs I/O, reads a clock, makes ids or imports the SDK, the tokenizer or the
store. What needs the outside world is yielded as an effect (`compaction.effects`) for a
driver. Rooms, bottom up (each imports only the ones before it; each one's map is its
`__init__`): `values`, `measuring`, `cutting`, `facts`, `compaction`, `strategies`; on top,
`compaction_core` composes them into `compact_and_transition`'s steps.
"""
