"""Which analyzer a dream uses: a name → an object with ``label`` and ``analyze(doc, served=()) -> AnalysisResult``.

``rules`` is the default (deterministic, no network). ``openai`` is available when a model is configured
(DREAMWEB_LLM_MODEL, plus OPENAI_API_KEY or OPENAI_BASE_URL); asked for without that configuration the dream falls
back to ``rules`` and says so, as contracts/README.md describes. A run records the analyzer's label, ``rules`` or
``openai:<model>``, and the workers rebuild the analyzer from that label, so every batch of one run uses the same
model even if the settings change meanwhile.

Other analyzers come only from the operator's settings (DREAMWEB_EXTRA_ANALYZERS) or from ``register`` in code
(tests): an analyzer name taken from a policy or a request never imports anything.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from . import rules

log = logging.getLogger(__name__)

DEFAULT = "rules"


class UnknownAnalyzer(ValueError):
    pass


@dataclass(frozen=True)
class Analyzer:
    name: str  # what people choose: rules | openai | an extra name
    label: str  # what the run records: rules | openai:<model>
    analyze: Callable  # analyze(doc, served=()) -> AnalysisResult
    # Whether analysis costs tokens (then the run's token budget applies and results are saved per session).
    uses_tokens: bool = False


_registered: dict[str, Callable[[str], Analyzer]] = {}


def register(name: str, factory: Callable[[str], Analyzer]) -> None:
    """Add an analyzer by name; ``factory(label)`` builds it (tests register fakes this way)."""
    _registered[name] = factory


def unregister(name: str) -> None:
    _registered.pop(name, None)


def openai_configured() -> bool:
    return bool(settings.DREAMWEB_LLM_MODEL and (settings.OPENAI_API_KEY or settings.OPENAI_BASE_URL))


def names() -> list[str]:
    return ["rules", "openai", *sorted(set(_registered) | set(_extra()))]


def _extra() -> dict[str, str]:
    return dict(getattr(settings, "DREAMWEB_EXTRA_ANALYZERS", {}) or {})


def resolve(name: str | None) -> str:
    """The label a run will record for the analyzer asked for (None: the default)."""
    name = (name or DEFAULT).strip()
    if name == "rules":
        return "rules"
    if name == "openai" or name.startswith("openai:"):
        if not openai_configured():
            log.warning("the openai analyzer is not configured (DREAMWEB_LLM_MODEL, OPENAI_API_KEY): using rules")
            return "rules"
        model = name.partition(":")[2] or settings.DREAMWEB_LLM_MODEL
        return f"openai:{model}"
    if name in _registered or name in _extra():
        return name
    raise UnknownAnalyzer(f"unknown analyzer {name!r}; choose one of {', '.join(names())}")


def get(label: str) -> Analyzer:
    """The analyzer for a label recorded on a run."""
    name, _, arg = label.partition(":")
    if name in _registered:
        return _registered[name](label)
    if name == "rules":
        return Analyzer("rules", "rules", rules.analyze)
    if name == "openai":
        # Imported only for a run that uses it: a rules-only worker does not load the model's side.
        from .openai_analyzer import OpenAIAnalyzer

        analyzer = OpenAIAnalyzer(model=arg or settings.DREAMWEB_LLM_MODEL)
        return Analyzer("openai", f"openai:{analyzer.model}", analyzer.analyze, uses_tokens=True)
    target = _extra().get(name)
    if target:
        module, _, attr = target.partition(":")
        func = getattr(importlib.import_module(module), attr)
        return Analyzer(name, name, func, uses_tokens=bool(getattr(func, "uses_tokens", False)))
    raise UnknownAnalyzer(f"unknown analyzer {label!r}")


def model_of(label: str) -> str:
    return label.partition(":")[2]
