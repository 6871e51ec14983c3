"""Values: what the core works on, and the seams it shares with the outside (imports no other room).

`blocks` typed content blocks and the one dispatch on a block's kind · `messages` message values
and the Messages API's conversation rules · `settings` how and when to compact, checked when made
· `validation` light checks and defaults the CLI imports at start-up · `model` the seam to
whatever answers messages (requests, responses; the older capability protocols) ·
`model_profile` what one model can do (`ModelProfile`, `Price`) · `profile_table` the one lookup
of a model's profile (`profile_of`) and the table shipped with it · `tool` what a tool is
to the loop · `tool_facts` what a tool call did, as facts (names no tool) · `shorten` long texts
cut without losing what matters · `usage` what the API reports a response used ·
`ledger_values` the artifact ledger's facts · `carried` what a compaction by the API's summary
carries over, in parts (a message keeps them beside the text they render).
"""
