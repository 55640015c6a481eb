"""Route prices: the user's, else a maintained table's (genai-prices), else 0 with a warning.

A route prices its calls with ``price_input_per_1m``/``price_output_per_1m`` (USD per million tokens). Before a
sweep starts, :func:`price_routes` settles every route's prices once:

- a local model (the ``embedded`` server, the ``scripted`` double) costs nothing: 0;
- prices the config gives win, even 0 (a free local vLLM); a route giving one of the two has 0 for the other;
- a route the sweep calls that gives neither is looked up (one it does not call keeps no price, and its record
  says ``unpriced``) in genai-prices' bundled table (pydantic's maintained
  list of hosted models' prices, read offline: nothing is fetched), by its provider and model: the provider from
  the ``base_url`` when the table knows it (OpenRouter, OpenAI, Anthropic, ...), else from the model name alone
  (a local stand-in serving ``gpt-4o-mini``); a ``langchain`` route's ``provider:model`` names both. The route
  then records where its prices came from (:class:`TablePrice`), and each run's metadata says so with the date;
- a model the table does not know is priced 0 and the sweep says so on the console, and every summary and
  report of the experiment repeats it (:func:`descriptor.provenance.price_notes`): its costs are not measured.

Prices are per token of input and of output at the table's standard rate on the day of the lookup; cached-input
discounts, batch rates and long-context tiers are not modelled (the table has them; the call layer does not know
which applied).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal

from descriptor.provenance import unpriced_note
from mas.config import ExperimentConfig, ModelRoute, TablePrice

LOCAL_PROVIDERS = ("embedded", "scripted")
"""Providers whose model runs here or nowhere: priced 0, never looked up."""
TABLE = "genai-prices"
PER_TOKENS = 1000
"""Tokens the price is asked for, scaled to a million: small enough to stay in the table's first tier."""


def price_routes(cfg: ExperimentConfig, used: Iterable[str]) -> tuple[ExperimentConfig, list[str]]:
    """``cfg`` with every route's prices settled (see the module doc), and one warning per route of ``used``
    (route names the sweep calls) that the table does not know."""
    used = set(used)
    routes: dict[str, ModelRoute] = {}
    warnings: list[str] = []
    for name, route in cfg.models.items():
        given = (route.price_input_per_1m, route.price_output_per_1m)
        if route.provider in LOCAL_PROVIDERS or given != (None, None):
            routes[name] = route.model_copy(update={"price_input_per_1m": given[0] or 0.0,
                                                    "price_output_per_1m": given[1] or 0.0})
            continue
        if name not in used:  # never called by this sweep: not looked up, and its record says so
            routes[name] = route
            continue
        found = table_price(route)
        if found is None:
            table = TablePrice(table=table_version(), model=None)
            routes[name] = route.model_copy(update={"price_input_per_1m": 0.0, "price_output_per_1m": 0.0,
                                                    "price_table": table})
            warnings.append(unpriced_note(name, route.model, table.table))
        else:
            inp, out, table = found
            routes[name] = route.model_copy(update={"price_input_per_1m": inp, "price_output_per_1m": out,
                                                    "price_table": table})
    return cfg.model_copy(update={"models": routes}), warnings


def table_version() -> str:
    """``genai-prices <version>``: the table a price came from."""
    from importlib.metadata import version

    return f"{TABLE} {version(TABLE)}"


def table_price(route: ModelRoute, when: datetime | None = None) -> tuple[float, float, TablePrice] | None:
    """(USD per million input tokens, per million output tokens, where they come from) of ``route``'s model in the
    table on ``when`` (default: now), or None when the table does not know it."""
    from genai_prices import Usage
    from genai_prices.data_snapshot import get_snapshot

    when = when or datetime.now(UTC)
    snapshot = get_snapshot()
    for provider_id, provider_url, model in _candidates(route):
        try:
            provider, info = snapshot.find_provider_model(model, None, provider_id, provider_url)
        except LookupError:
            continue
        inp = info.calc_price(Usage(input_tokens=PER_TOKENS), provider, genai_request_timestamp=when)
        out = info.calc_price(Usage(output_tokens=PER_TOKENS), provider, genai_request_timestamp=when)
        scale = Decimal(1_000_000 // PER_TOKENS)
        return (float(inp.input_price * scale), float(out.output_price * scale),
                TablePrice(table=table_version(), model=f"{provider.id}:{info.id}"))
    return None


def _candidates(route: ModelRoute) -> list[tuple[str | None, str | None, str]]:
    """(provider id, provider URL, model reference) to try, most specific first."""
    model = route.model.strip()
    if not model:
        return []
    out: list[tuple[str | None, str | None, str]] = []
    if route.provider == "langchain" and ":" in model:  # init_chat_model's "anthropic:claude-..."
        provider, bare = model.split(":", 1)
        out.append((provider.replace("_", "-"), None, bare))
        model = bare
    if route.base_url:
        out.append((None, route.base_url, model))
    elif route.provider == "openai":  # no base_url: the OpenAI API itself
        out.append(("openai", None, model))
    out.append((None, None, model))  # the model's own name, on whichever provider the table matches it
    return out

