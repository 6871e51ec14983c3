"""Realistic Python source for the corpus: modules and test files built from templates.

Every generated file parses as Python (the corpus tests check it). Names come from a small
domain (a shop backend: users, orders, invoices...) so that files, requests, diffs and errors
in one transcript talk about the same things.
"""

from __future__ import annotations

import random

ENTITIES = (
    "user", "order", "invoice", "payment", "webhook", "session", "report", "refund",
    "coupon", "shipment", "account", "subscription",
)  # fmt: skip

MODULE_HEADERS = (
    '''"""{title}."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = {timeout}
MAX_PAGE_SIZE = {page}
''',
    '''"""{title}."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger(__name__)

API_BASE = os.environ.get("SHOP_API_BASE", "https://api.example-shop.test/v1")
RETRY_STATUSES = frozenset({{429, 500, 502, 503, 504}})
''',
)

FUNCTIONS = (
    '''

@dataclass(frozen=True, slots=True)
class {Entity}:
    """One {entity} row as the service layer sees it."""

    id: int
    name: str
    status: str = "active"
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    tags: tuple[str, ...] = ()

    @property
    def is_active(self) -> bool:
        return self.status == "active"
''',
    '''

def get_{entity}(conn: sqlite3.Connection, {entity}_id: int) -> {Entity} | None:
    """Return the {entity} with this id, or None when there is none."""
    row = conn.execute(
        "SELECT id, name, status, created_at FROM {entity}s WHERE id = ?", ({entity}_id,)
    ).fetchone()
    if row is None:
        log.debug("{entity} %s not found", {entity}_id)
        return None
    return {Entity}(id=row[0], name=row[1], status=row[2], created_at=row[3])
''',
    '''

def list_{entity}s(
    conn: sqlite3.Connection, *, status: str | None = None, limit: int = 50, offset: int = 0
) -> list[{Entity}]:
    """A page of {entity}s, newest first; ``limit`` is capped at MAX_PAGE_SIZE."""
    limit = min(limit, MAX_PAGE_SIZE)
    query = "SELECT id, name, status, created_at FROM {entity}s"
    params: list[object] = []
    if status is not None:
        query += " WHERE status = ?"
        params.append(status)
    query += " ORDER BY created_at DESC LIMIT ? OFFSET ?"
    params += [limit, offset]
    return [{Entity}(*row) for row in conn.execute(query, params).fetchall()]
''',
    '''

class {Entity}Service:
    """Business rules for {entity}s; the only place that writes the {entity}s table."""

    def __init__(self, conn: sqlite3.Connection, *, clock: type[datetime] = datetime) -> None:
        self._conn = conn
        self._clock = clock

    def create(self, name: str, *, tags: Sequence[str] = ()) -> {Entity}:
        if not name.strip():
            raise ValueError("a {entity} needs a name")
        now = self._clock.now(UTC)
        cursor = self._conn.execute(
            "INSERT INTO {entity}s (name, status, created_at) VALUES (?, 'active', ?)",
            (name.strip(), now.isoformat()),
        )
        log.info("created {entity} %s", cursor.lastrowid)
        return {Entity}(id=int(cursor.lastrowid or 0), name=name.strip(), tags=tuple(tags))

    def archive(self, {entity}_id: int) -> bool:
        changed = self._conn.execute(
            "UPDATE {entity}s SET status = 'archived' WHERE id = ? AND status != 'archived'",
            ({entity}_id,),
        ).rowcount
        return changed == 1
''',
    '''

@contextmanager
def {entity}_transaction(
    path: Path, *, timeout: float = DEFAULT_TIMEOUT
) -> Iterator[sqlite3.Connection]:
    """A connection inside one IMMEDIATE transaction, committed on success."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield conn
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise
    finally:
        conn.close()
''',
    '''

def retry_{entity}_call(  # type: ignore[no-untyped-def]
    func, *, attempts: int = {attempts}, delay: float = 0.5
):
    """Call ``func`` until it succeeds, backing off between attempts."""
    for attempt in range(1, attempts + 1):
        try:
            return func()
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or attempt == attempts:
                raise
            log.warning("{entity}: database locked (attempt %d/%d)", attempt, attempts)
            time.sleep(delay * 2 ** (attempt - 1))
    raise AssertionError("unreachable")
''',
    '''

def validate_{entity}_payload(payload: dict[str, object]) -> dict[str, object]:
    """Check an incoming {entity} payload; raise ValueError naming the first bad field."""
    required = ("name", "status")
    for key in required:
        if key not in payload:
            raise ValueError(f"{entity}: missing field {{key!r}}")
    if payload["status"] not in ("active", "archived", "pending"):
        raise ValueError(f"{entity}: unknown status {{payload['status']!r}}")
    name = str(payload["name"]).strip()
    if len(name) > {maxlen}:
        raise ValueError(f"{entity}: name longer than {maxlen} characters")
    return {{**payload, "name": name}}
''',
    '''

async def fetch_{entity}s(
    client: httpx.AsyncClient, *, page_size: int = {page}
) -> list[dict[str, Any]]:
    """Every {entity} from the upstream API, following the pagination cursor."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = {{"limit": page_size}} | ({{"cursor": cursor}} if cursor else {{}})
        response = await client.get(f"{{API_BASE}}/{entity}s", params=params, timeout={timeout})
        if response.status_code in RETRY_STATUSES:
            await asyncio.sleep(1.0)
            continue
        response.raise_for_status()
        body = response.json()
        items.extend(body["data"])
        cursor = body.get("next_cursor")
        if not cursor:
            return items
''',
    '''

def {entity}_to_json({entity}: {Entity}) -> str:
    """The wire form of a {entity} (stable key order, ISO dates)."""
    return json.dumps(
        {{
            "id": {entity}.id,
            "name": {entity}.name,
            "status": {entity}.status,
            "created_at": {entity}.created_at.isoformat(),
            "tags": list({entity}.tags),
        }},
        sort_keys=True,
    )
''',
)

TEST_FUNCTIONS = (
    """

def test_create_{entity}_strips_the_name(service: {Entity}Service) -> None:
    created = service.create("  {Entity} {n}  ")
    assert created.name == "{Entity} {n}"
    assert created.is_active
""",
    """

def test_archive_{entity}_twice_is_a_no_op(service: {Entity}Service) -> None:
    created = service.create("to archive")
    assert service.archive(created.id) is True
    assert service.archive(created.id) is False
""",
    """

@pytest.mark.parametrize("status", ["active", "archived", "pending"])
def test_list_{entity}s_filters_by_status(conn: sqlite3.Connection, status: str) -> None:
    rows = list_{entity}s(conn, status=status, limit=500)
    assert len(rows) <= MAX_PAGE_SIZE
    assert all(row.status == status for row in rows)
""",
    """

def test_validate_{entity}_payload_names_the_missing_field() -> None:
    with pytest.raises(ValueError, match="missing field 'status'"):
        validate_{entity}_payload({{"name": "x"}})
""",
)

TEST_HEADER = '''"""Tests for {module}."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from {import_path} import *  # noqa: F403


@pytest.fixture
def conn(tmp_path) -> Iterator[sqlite3.Connection]:  # type: ignore[no-untyped-def]
    connection = sqlite3.connect(tmp_path / "test.db")
    yield connection
    connection.close()


@pytest.fixture
def service(conn: sqlite3.Connection) -> {Entity}Service:
    return {Entity}Service(conn)
'''


def _fill(template: str, rng: random.Random, entity: str) -> str:
    return template.format(
        entity=entity,
        Entity=entity.capitalize(),
        timeout=rng.choice((5.0, 10.0, 30.0)),
        page=rng.choice((50, 100, 200)),
        attempts=rng.choice((3, 4, 5)),
        maxlen=rng.choice((80, 120, 255)),
        n=rng.randint(1, 999),
        title=f"Persistence and rules for {entity}s",
    )


def python_module(rng: random.Random, path: str, size: int) -> str:
    """A Python module of about ``size`` characters (at least one header and one function)."""
    entities = list(ENTITIES)
    rng.shuffle(entities)
    header = rng.choice(MODULE_HEADERS)
    out = _fill(header, rng, entities[0]).replace(
        f"Persistence and rules for {entities[0]}s", f"{path}: persistence and business rules"
    )
    combos = [(template, entity) for entity in entities for template in FUNCTIONS]
    for template, entity in combos:
        out += _fill(template, rng, entity)
        if len(out) >= size:
            break
    return out


def test_module(rng: random.Random, path: str, size: int) -> str:
    """A pytest module of about ``size`` characters."""
    first = rng.choice(ENTITIES)
    module = path.removeprefix("tests/test_").removesuffix(".py")
    out = TEST_HEADER.format(module=module, import_path=f"app.{module}", Entity=first.capitalize())
    for entity in (first, *ENTITIES):
        for template in TEST_FUNCTIONS:
            out += _fill(template, rng, entity)
            if len(out) >= size:
                return out
    return out


def source_for(rng: random.Random, path: str, size: int) -> str:
    """Plausible content for ``path`` (Python, TOML, YAML or markdown) of about ``size`` chars."""
    if path.endswith(".py"):
        if path.startswith("tests/"):
            return test_module(rng, path, size)
        return python_module(rng, path, size)
    if path.endswith(".toml"):
        return PYPROJECT
    if path.endswith((".yml", ".yaml")):
        return CI_WORKFLOW
    return "\n\n".join(
        f"## {entity.capitalize()}s\n\nThe `{entity}s` table is written only by "
        f"`{entity.capitalize()}Service`; reads go through `list_{entity}s` and `get_{entity}`."
        for entity in ENTITIES
    )[:size]


PYPROJECT = """[project]
name = "shop"
version = "2.4.0"
requires-python = ">=3.11"
dependencies = ["httpx>=0.27", "pydantic>=2.7", "click>=8.1"]

[project.optional-dependencies]
test = ["pytest>=8", "pytest-cov>=5", "hypothesis>=6.100"]

[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = "-ra --strict-markers"

[tool.ruff]
line-length = 100
"""

CI_WORKFLOW = """name: ci
on: [push, pull_request]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: pip install -e ".[test]"
      - run: pytest -q --cov=app
"""
