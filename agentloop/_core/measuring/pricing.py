"""What tokens cost: the bill of a usage at the price a model's profile gives (pure).

Prices are US dollars per million tokens of base input and output; the prompt cache's are
multiples of the input price (a 5-minute write 1.25×, a read 0.1×). The token figures always
come from the API's usage; only the dollar amount depends on the table (``profile_table``), and
it is marked as an estimate where the model is not in it (its family's price is assumed).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from agentloop._core.values.messages import Usage
from agentloop._core.values.model_profile import Price
from agentloop._core.values.profile_table import PRICES, builtin_profile
from agentloop._errors import ConfigurationError

CACHE_WRITE_MULTIPLIER = 1.25
CACHE_READ_MULTIPLIER = 0.1
__all__ = [
    "CACHE_READ_MULTIPLIER",
    "CACHE_WRITE_MULTIPLIER",
    "NO_BILL",
    "PRICES",
    "Bill",
    "Price",
    "bill",
    "parse_prices",
    "price_of",
]


@dataclass(frozen=True, slots=True)
class Bill:
    """What a usage costs: the API's token figures and their price."""

    usage: Usage
    dollars: float
    estimated: bool
    """True where the model's price is not known (its family's, or Sonnet's, was assumed)."""

    @property
    def input_tokens(self) -> int:
        """All input, cached or not."""
        return self.usage.prompt_tokens

    @property
    def cache_read_share(self) -> float:
        """The share of input served from the prompt cache."""
        total = self.usage.prompt_tokens
        return self.usage.cache_read_input_tokens / total if total else 0.0

    @property
    def billed_input_ratio(self) -> float:
        """Billed input over what the same input would cost with no cache at all."""
        u = self.usage
        total = u.prompt_tokens
        if not total:
            return 0.0
        billed = (
            u.input_tokens
            + CACHE_WRITE_MULTIPLIER * u.cache_creation_input_tokens
            + CACHE_READ_MULTIPLIER * u.cache_read_input_tokens
        )
        return billed / total

    def __add__(self, other: Bill) -> Bill:
        return Bill(
            self.usage + other.usage,
            self.dollars + other.dollars,
            self.estimated or other.estimated,
        )


NO_BILL = Bill(Usage(), 0.0, False)


def price_of(model: str, overrides: Mapping[str, Price] | None = None) -> tuple[Price, bool]:
    """The model's price and whether it is known (False: a family's price, assumed): the
    longest override prefix ``model`` starts with, else its profile's price."""
    matches = [prefix for prefix in overrides or {} if model.startswith(prefix)]
    if overrides and matches:
        return overrides[max(matches, key=len)], True
    profile = builtin_profile(model)
    return profile.price, profile.price_known


def bill(usage: Usage, model: str, overrides: Mapping[str, Price] | None = None) -> Bill:
    """The price of ``usage`` on ``model``."""
    price, known = price_of(model, overrides)
    per_token = price.input / 1_000_000
    dollars = (
        usage.input_tokens * per_token
        + usage.cache_creation_input_tokens * per_token * CACHE_WRITE_MULTIPLIER
        + usage.cache_read_input_tokens * per_token * CACHE_READ_MULTIPLIER
        + usage.output_tokens * price.output / 1_000_000
    )
    return Bill(usage, dollars, not known)


def parse_prices(text: str) -> dict[str, Price]:
    """Price overrides from JSON: ``{"model-prefix": {"input": 3, "output": 15}, ...}`` in
    dollars per million tokens (``AGENTLOOP_PRICES``)."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        prices = {
            str(model): Price(float(entry["input"]), float(entry["output"]))
            for model, entry in data.items()
        }
        for model, price in prices.items():
            if not (0 <= price.input < math.inf and 0 <= price.output < math.inf):
                raise ValueError(f"{model}: a price is a number of dollars, 0 or more")
        return prices
    except (ValueError, TypeError, KeyError) as error:
        raise ConfigurationError(
            'prices must be JSON like {"model-prefix": {"input": 3, "output": 15}} '
            f"(dollars per million tokens): {error}"
        ) from None
