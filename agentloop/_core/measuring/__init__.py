"""Measuring: how full the context is, what a figure means, what a request costs (+ `values`).

`context` usage, the trigger, the decision and the breaker · `figures` a token figure and its
source, one rule for every surface · `cache` where a request's prompt-cache breakpoints go ·
`pricing` a per-model price table and the bill of a usage.
"""
