"""What people and the agent write: requests, steering, the agent's narration, search topics."""

from __future__ import annotations

REQUESTS = (
    "Add pagination to `list_{entity}s` in {path}: a `cursor` argument instead of offset, and "
    "keep the old `offset` keyword working for one release with a DeprecationWarning.",
    "The {entity} export is slow on big accounts. Profile `{entity}_to_json` and the query in "
    "{path}, then make it stream rows instead of loading everything.",
    "Write tests for `{Entity}Service.archive` covering the double-archive case and the "
    "audit log entry; put them in tests/test_{entity}s.py.",
    "CI is red on main since this morning, something in the {entity} tests. Find out why and "
    "fix it without skipping tests.",
    "Rename `get_{entity}` to `fetch_{entity}` everywhere (src and tests) and keep a "
    "deprecated alias in {path}.",
    "We need a `--dry-run` flag on `shop {entity}s sync` that prints what would change "
    "without writing to the database.",
    "Move the retry logic for {entity} calls out of {path} into a small `app/retry.py` helper "
    "and use it from both the worker and the API client.",
    "The {entity} webhook handler double-processes events when the upstream retries. Make it "
    "idempotent using the event id; store seen ids for 7 days.",
    "Validate {entity} payloads at the API boundary with pydantic v2 models instead of the "
    "hand-written checks in {path}.",
    "Add structured logging (request id, {entity} id, duration) to the {entity} endpoints and "
    "make sure nothing logs card numbers.",
)

STEERING = (
    "actually, use the v2 endpoint (/api/v2/{entity}s) for this, v1 is being turned off next month",
    "wait, don't touch the migrations folder at all, only the service layer",
    "keep the old function name `{old}` as an alias, the CLI plugin still imports it",
    "stop running the whole suite, it takes ten minutes here; only run tests/test_{entity}s.py",
    "use httpx instead of requests for the {entity} client, we are dropping requests",
    "also the {entity} ids are strings now (ULIDs), not ints; don't cast them",
    "please don't add new dependencies for this, the deploy image is frozen until Friday",
    "one more thing: the timeout must come from settings.{entity}_timeout, not a constant",
)

NARRATION: dict[str, tuple[str, ...]] = {
    "read_file": (
        "Let me look at how {path} handles this first.",
        "I need to see {path} before changing anything.",
        "Reading {path} to see the fixtures this relies on.",
    ),
    "grep": (
        "I'll check where `{pattern}` is used before changing its signature.",
        "Searching for `{pattern}` to find every call site.",
    ),
    "list_files": ("Let me get an overview of the repository layout.",),
    "edit_file": (
        "Now I'll update {path}.",
        "That confirms it. Next I'll fix {path}.",
        "The query builds the whole result set in memory; I'll change that in {path}.",
    ),
    "write_file": (
        "I'll put this in a new module, {path}.",
        "Writing {path} with the new implementation.",
    ),
    "run_command": (
        "Running `{command}` to see the current state.",
        "Let me re-run this after that change: `{command}`.",
    ),
}

FINALS = (
    "Done. I changed {path} ({what}) and added tests; the {entity} suite passes "
    "({passed} passed). I left the public signature unchanged.",
    "Finished: {what} in {path}. Ruff and mypy are clean and all {passed} tests pass. One "
    "follow-up: the {entity} fixtures still create rows one by one, which is slow.",
    "All set. Summary: {what}; touched {path} and its tests. Nothing else changed.",
)

WHATS = (
    "replaced the offset query with a keyset cursor",
    "made the retry back off exponentially and give up after 5 attempts",
    "added the dry-run path and a test for it",
    "moved validation into a pydantic model",
    "wrapped the writes in one IMMEDIATE transaction",
)

THINKING = (
    "The user wants {what}. The failing assertion is in the {entity} tests, and the "
    "limit is capped at MAX_PAGE_SIZE, so a caller asking for 500 gets 50 rows silently; the "
    "test expects an error instead. I should check whether other callers depend on the cap "
    "before changing it. {path} is the only writer, so the change stays local.",
    "Two options: patch every call site of `{name}` or keep an alias. The steering message says "
    "keep the alias, so: rename, add the alias with a DeprecationWarning, update tests.",
)

PLACEHOLDER = "[Request interrupted by user]"
INTERRUPTED_TOOL = "[Request interrupted by user for tool use]"

SEARCHES = (
    (
        "sqlite database is locked WAL mode concurrent writers python",
        (
            ("https://www.sqlite.org/wal.html", "Write-Ahead Logging"),
            (
                "https://www.sqlite.org/lockingv3.html",
                "File Locking And Concurrency In SQLite Version 3",
            ),
            (
                "https://docs.python.org/3/library/sqlite3.html",
                "sqlite3 — DB-API 2.0 interface for SQLite databases",
            ),
            ("https://www.sqlite.org/c3ref/busy_timeout.html", "Set A Busy Timeout"),
        ),
        "WAL provides more concurrency as readers do not block writers and a writer does not "
        "block readers.",
    ),
    (
        "httpx AsyncClient retry transport backoff 429",
        (
            ("https://www.python-httpx.org/advanced/transports/", "Transports - HTTPX"),
            ("https://www.python-httpx.org/advanced/timeouts/", "Timeouts - HTTPX"),
            ("https://www.python-httpx.org/exceptions/", "Exceptions - HTTPX"),
        ),
        "The retries parameter applies only to connection errors, not to HTTP status codes.",
    ),
    (
        "pydantic v2 field_validator mode before strip whitespace",
        (
            ("https://docs.pydantic.dev/latest/concepts/validators/", "Validators - Pydantic"),
            ("https://docs.pydantic.dev/latest/api/config/", "Configuration - Pydantic"),
            ("https://docs.pydantic.dev/latest/migration/", "Migration Guide - Pydantic"),
        ),
        "Before validators run before Pydantic's internal parsing and validation.",
    ),
    (
        "idempotent webhook handler event id deduplication window",
        (
            (
                "https://docs.stripe.com/webhooks#handle-duplicate-events",
                "Receive Stripe events in your webhook endpoint",
            ),
            (
                "https://hookdeck.com/webhooks/guides/implement-webhook-idempotency",
                "How to Implement Webhook Idempotency",
            ),
            (
                "https://www.rfc-editor.org/rfc/rfc9110#name-idempotent-methods",
                "RFC 9110: HTTP Semantics",
            ),
        ),
        "Webhook endpoints might occasionally receive the same event more than once.",
    ),
    (
        "python keyset pagination cursor sqlite order by created_at id",
        (
            (
                "https://use-the-index-luke.com/no-offset",
                "We need tool support for keyset pagination",
            ),
            ("https://www.sqlite.org/rowvalue.html", "Row Values"),
            (
                "https://docs.python.org/3/library/base64.html",
                "base64 — Base16, Base32, Base64, Base85 Data Encodings",
            ),
        ),
        "Keyset pagination uses the values of the last row of the previous page.",
    ),
)

DOCUMENTS = (
    (
        "Payments API v2 — Migration Guide",
        (
            (
                "1. Overview",
                "Version 2 replaces offset pagination with cursors.",
                "All endpoints move from /v1 to /api/v2.",
            ),
            (
                "2. Authentication",
                "Keys are now scoped per environment.",
                "Rotate keys before 2026-06-30.",
            ),
            (
                "3. Webhooks",
                "Signatures use HMAC-SHA256 over the raw body and timestamp.",
                "Reject events older than 5 minutes.",
            ),
            (
                "4. Errors",
                "Errors carry a machine-readable code and a request id.",
                "Retry only on 429 and 5xx.",
            ),
        ),
    ),
    (
        "Shop Data Retention Policy 2026",
        (
            ("Scope", "Applies to orders, invoices, refunds and webhook logs."),
            ("Retention", "Invoices: 10 years. Webhook logs: 30 days. Sessions: 7 days."),
            ("Deletion", "Deletion requests are processed within 30 days."),
        ),
    ),
)
