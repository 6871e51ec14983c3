"""Facts: what survives a compaction besides the summary (+ `values`, `cutting`).

`ledger` what the agent did, read from tool facts only, merged across compactions · `ledger_fit`
its budget: what goes first and the searches that find it · `receipt` what a compaction left out
and what the new context still holds · `preserved_state` the hooks and the ledger every compacted
context carries.
"""
