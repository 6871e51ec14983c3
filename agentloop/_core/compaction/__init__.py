"""Compaction: the job every strategy shares, and the summaries (+ every room below).

`effects` what the core asks the outside world to do (yielded, performed by a driver) ·
`results` what a compaction produces (summary record, transition, outcome) · `strategy` the
protocol, the registry, `Budget` and `Job` · `summary` the structured summary and the offline
digest · `whole_summary` the summary of a whole history as a compaction asks for it · `prepared`
summaries made ahead (`prepared_rest`: one request brings a short one up to date) ·
`api_compaction` the API's own summary on demand (cut, kept turns, the appended message) ·
`server_compaction` the threshold edit of strategy `server` · `round_fit` the newest tool round
shortened when nothing else fits · `plan` the preview, with no model call and no write.
"""
