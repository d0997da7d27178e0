"""What a model call costs: the one place where token usage becomes US dollars.

``model.pricing`` in an agent config gives the prices per million input (prompt)
and output (completion) tokens, inline or as the path of a pricing file. Every
figure in the artefacts (a response's ``cost_usd``, a stream's and an arm's total,
the live progress line) and the ``--evomemory-max-cost`` guard price usage through
:meth:`Pricing.cost_of`, so they always agree.

A pricing file is YAML (or JSON): either one price mapping, or a mapping from the
model name (``model.model``) to one, so a team keeps all its models' prices in one
file::

    gpt-4o-mini: {input_per_million: 0.15, output_per_million: 0.60}
    gpt-4o: {input_per_million: 2.50, output_per_million: 10.00}
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core import boundedread
from ..core.errors import ConfigError
from ..core.types import Usage
from .yamlio import parse_yaml

#: Keys of one price mapping.
PRICE_KEYS = ("input_per_million", "output_per_million")

#: A pricing file is a few lines; anything bigger is not one.
MAX_PRICING_FILE_BYTES = 1_000_000

Price = Annotated[float, Field(ge=0.0, le=1_000_000.0)]


class Pricing(BaseModel):
    """US dollars per million input (prompt) and output (completion) tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False, defer_build=True)

    input_per_million: Price
    output_per_million: Price

    def cost_of(self, usage: Usage) -> float:
        """The cost of one call (or of any sum of calls) with this usage."""
        return (usage.prompt_tokens * self.input_per_million + usage.completion_tokens * self.output_per_million) / 1e6

    def most_for(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The cost of a call that uses at most these many tokens."""
        return self.cost_of(Usage(prompt_tokens, completion_tokens))


def cost_of(usage: Usage, pricing: Pricing | None) -> float | None:
    """``usage`` priced, or ``None`` when the model has no pricing."""
    return None if pricing is None else pricing.cost_of(usage)


class PricingFileError(ValueError):
    """A pricing file that cannot be used; the message says why and what to write."""


def load_pricing_file(path: Path, model: str) -> Pricing:
    """The prices of ``model`` in the pricing file at ``path``."""
    try:
        text = boundedread.read_text(
            path, limit=MAX_PRICING_FILE_BYTES, what="a pricing file (a few lines)", error=PricingFileError
        )
        data: Any = parse_yaml(text)  # the strict reader of every config file
    except OSError as error:
        raise PricingFileError(
            f"cannot read the pricing file {path}: {error.strerror or error}; check the path (relative to the "
            "agent config's directory), or give the prices inline"
        ) from None
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise PricingFileError(
            f"the pricing file {path} is not YAML or JSON: {str(error).splitlines()[0]}; fix it, {_example()}"
        ) from None
    except ConfigError as error:  # what the strict reader refuses (an alias, a duplicate key, ...)
        raise PricingFileError(f"the pricing file {path}: {error}") from None
    if not isinstance(data, dict):
        raise PricingFileError(f"the pricing file {path} must hold a mapping, {_example()}")
    if any(key in data for key in PRICE_KEYS):
        entry: Any = data
    elif model in data:
        entry = data[model]
    else:
        listed = ", ".join(repr(str(name)) for name in list(data)[:10])
        raise PricingFileError(
            f"the pricing file {path} has no prices for model {model!r} (it lists {listed or 'none'}); "
            f"add {model}: {{input_per_million: ..., output_per_million: ...}}"
        )
    try:
        return Pricing.model_validate(entry)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem.get("loc", ())) or "the entry"
        raise PricingFileError(f"the pricing file {path}: {where}: {problem.get('msg')}; {_example()}") from None


def resolve_pricing(value: Pricing | str | None, model: str | None, base_dir: Path) -> Pricing | None:
    """``model.pricing`` as prices: given inline, or read from the file it names
    (relative to ``base_dir``). Raises :class:`PricingFileError`. A pricing file
    prices API models by their name; a local model has none, so it is priced inline."""
    if value is None or isinstance(value, Pricing):
        return value
    if model is None:
        raise PricingFileError(
            f"{value}: a pricing file lists API models by name, and a local model has none; "
            f"give its prices inline, {_example()}"
        )
    reference = Path(value).expanduser()
    return load_pricing_file(reference if reference.is_absolute() else base_dir / reference, model)


def _example() -> str:
    return "e.g. {input_per_million: 0.15, output_per_million: 0.60} (US dollars per million tokens)"


__all__ = ["PRICE_KEYS", "Pricing", "PricingFileError", "cost_of", "load_pricing_file", "resolve_pricing"]
