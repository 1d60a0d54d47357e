"""Forms of the review pages: queue filters, decisions, bulk decisions, the autonomy policy, dream buttons."""

from __future__ import annotations

from django import forms

from dreamweb.forms import formfield_with_limits
from dreamweb.input_guard import parse_id

from .analysis import registry
from .models import AutonomyPolicy, ProposalOperation, Risk
from .services import POLICY_FIELDS, REASON_MAX, STORE_FIELDS

SORTS = {
    # name: (label, ordering). Ties break on id so that paging is stable.
    "prevalence": ("Most sessions", ["-prevalence_sessions", "-confidence", "-id"]),
    "confidence": ("Most confident", ["-confidence", "-prevalence_sessions", "-id"]),
    "newest": ("Newest", ["-created_at", "-id"]),
    "oldest": ("Oldest", ["created_at", "id"]),
}
PER_PAGE = 20
MAX_PER_PAGE = 100
MAX_BULK = 200


class QueueFilterForm(forms.Form):
    """The queue's filters. Invalid values are dropped instead of failing the page (they come from URLs)."""

    store = forms.TypedChoiceField(required=False, coerce=int, empty_value=None)
    operation = forms.ChoiceField(required=False, choices=[("", "Any operation"), *ProposalOperation.choices])
    kind = forms.ChoiceField(required=False)
    risk = forms.ChoiceField(required=False, choices=[("", "Any risk"), *Risk.choices])
    agent = forms.ChoiceField(required=False)
    sort = forms.ChoiceField(required=False, choices=[(k, v[0]) for k, v in SORTS.items()])
    per = forms.IntegerField(required=False, min_value=1, max_value=MAX_PER_PAGE)

    def __init__(self, data, *, stores, kinds, agents):
        super().__init__(data)
        self.fields["store"].choices = [("", "All stores")] + [(s.pk, s.display_name) for s in stores]
        self.fields["kind"].choices = [("", "Any kind")] + [(k, k.replace("_", " ")) for k in kinds]
        self.fields["agent"].choices = [("", "Any agent scope"), ("_none", "Unscoped (all agents)")] + [
            (a, a) for a in agents
        ]

    def filters(self) -> dict:
        """Cleaned filters; a field that did not validate counts as absent."""
        self.is_valid()
        cleaned = {}
        for name in ("store", "operation", "kind", "risk", "agent", "sort", "per"):
            if name not in self.errors:
                cleaned[name] = self.cleaned_data.get(name)
        cleaned["sort"] = cleaned.get("sort") or "prevalence"
        cleaned["per"] = cleaned.get("per") or PER_PAGE
        return cleaned


class DecidedFilterForm(forms.Form):
    """The decided view's filters (invalid values are dropped, as on the queue)."""

    status = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Any outcome"),
            ("applied", "Applied"),
            ("rejected", "Rejected"),
            ("conflict", "Conflict"),
            ("superseded", "Superseded"),
        ],
    )
    by = forms.ChoiceField(
        required=False, choices=[("", "Anyone"), ("person", "A reviewer"), ("policy", "The store's policy")]
    )
    store = forms.TypedChoiceField(required=False, coerce=int, empty_value=None)
    operation = forms.ChoiceField(required=False, choices=[("", "Any operation"), *ProposalOperation.choices])

    def __init__(self, data, *, stores):
        super().__init__(data)
        self.fields["store"].choices = [("", "All stores")] + [(s.pk, s.display_name) for s in stores]

    def filters(self) -> dict:
        self.is_valid()
        return {name: self.cleaned_data.get(name) for name in self.fields if name not in self.errors}


class DecisionForm(forms.Form):
    """A decision on one card. ``edited`` says the edit form sent it: then key and scope are the reviewer's
    (an empty scope means every agent / every task). ``also`` names the same change pending in other stores."""

    # Not stripped: whitespace in an edited memory is the reviewer's choice.
    content = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 6}))
    reason = forms.CharField(
        required=False,
        max_length=REASON_MAX,
        error_messages={
            "max_length": f"The reason is too long (at most {REASON_MAX} characters). Nothing was decided."
        },
    )
    edited = forms.BooleanField(required=False)
    key = forms.CharField(required=False, max_length=200)
    scope_agent = forms.CharField(required=False, max_length=100)
    scope_task = forms.CharField(required=False, max_length=100)
    also = forms.Field(required=False, widget=forms.MultipleHiddenInput)
    then = forms.CharField(required=False)

    def clean_also(self):
        # One value per card, or one "1,2" from a card's Approve button (it sends the page's shared form).
        values = self.data.getlist("also") if hasattr(self.data, "getlist") else []
        values = [part for v in values[:MAX_BULK] for part in str(v).split(",")]
        return sorted({i for i in (parse_id(v) for v in values[:MAX_BULK]) if i is not None})

    def edits(self) -> dict:
        """The reviewer's edits of key and scope (only from the edit form)."""
        if not self.cleaned_data.get("edited"):
            return {}
        data = self.cleaned_data
        edits = {"scope": (data.get("scope_agent") or None, data.get("scope_task") or None)}
        if "key" in self.data:
            edits["key"] = data.get("key") or ""
        return edits


class IdListField(forms.Field):
    widget = forms.MultipleHiddenInput

    def to_python(self, value):
        values = value if isinstance(value, list | tuple) else ([value] if value else [])
        parsed = {parse_id(v) for v in values}
        if None in parsed:  # not an id at all, or beyond any id: the page was tampered with
            raise forms.ValidationError("Invalid selection.")
        ids = sorted(parsed)
        if len(ids) > MAX_BULK:
            raise forms.ValidationError(f"At most {MAX_BULK} cards at once.")
        return ids


class BulkForm(forms.Form):
    ids = IdListField(required=True, error_messages={"required": "Select at least one card first."})
    action = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(
        required=False,
        max_length=REASON_MAX,
        error_messages={
            "max_length": f"The reason is too long (at most {REASON_MAX} characters). Nothing was decided."
        },
    )
    # The second step: the page showed the counts and the person confirmed them.
    confirmed = forms.BooleanField(required=False)


class CommaListField(forms.CharField):
    def prepare_value(self, value):
        if isinstance(value, list | tuple):
            return ", ".join(value)
        return value

    def to_python(self, value):
        text = super().to_python(value) or ""
        return sorted({item.strip() for item in text.split(",") if item.strip()})


def analyzer_choices() -> list[tuple[str, str]]:
    """The registered analyzers, by name, with what each one is (the select of the policy page)."""
    described = {
        "rules": "rules: deterministic, offline",
        "openai": "openai: a language model"
        + ("" if registry.openai_configured() else " (not configured here: dreams fall back to rules)"),
    }
    return [(name, described.get(name, name)) for name in registry.names()]


class PolicyForm(forms.ModelForm):
    # The store's (memory.MemoryStore.agents), edited with its policy: the agents whose sessions its dream reads.
    agents = CommaListField(
        required=False,
        help_text="The agents this store serves, comma-separated: its dream reads only their sessions and counts "
        "prevalence among them. Empty: every agent of the team.",
    )
    analyzer = forms.ChoiceField(choices=analyzer_choices, help_text="What reads each session during a dream.")

    class Meta:
        model = AutonomyPolicy
        fields = [*POLICY_FIELDS, *STORE_FIELDS]
        widgets = {"mode": forms.RadioSelect}
        formfield_callback = formfield_with_limits  # the browser's min/max from the model's validators
        labels = {
            "min_sessions": "Recurrent from (sessions)",
            "min_share": "…and share of analysed sessions (0–1)",
            "min_confidence_auto": "Auto-apply confidence floor (0–1)",
            "min_sources": "Auto-apply only with sessions from at least (sources)",
            "max_sessions": "Session budget per dream",
            "token_budget": "Token budget per dream",
            "schedule_enabled": "Dream on a schedule",
            "schedule_minutes": "Every (minutes)",
            "forget_after_days": "Propose archiving entries unused for (days; 0: never)",
            "removal_risk": "Risk of a proposed removal",
            "consolidate": "Ask the language model for paraphrased and contradicting entries",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        names = ", ".join(registry.names())
        self.fields["analyzer"].error_messages["invalid_choice"] = f"One of: {names}."
        # Forms posted before forgetting (and sources) existed leave these out: the policy keeps its values.
        for name in ("forget_after_days", "removal_risk", "min_sources"):
            self.fields[name].required = False

    @classmethod
    def labels(cls) -> dict[str, str]:
        """Field name -> the label people read (the history and messages use them too)."""
        return {
            name: str(field.label or name.replace("_", " ").capitalize()) for name, field in cls.base_fields.items()
        }

    def clean_forget_after_days(self):
        value = self.cleaned_data.get("forget_after_days")
        return self.instance.forget_after_days if value is None else value

    def clean_removal_risk(self):
        return self.cleaned_data.get("removal_risk") or self.instance.removal_risk

    def clean_min_sources(self):
        value = self.cleaned_data.get("min_sources")
        return self.instance.min_sources if value is None else value


class DreamForm(forms.Form):
    dry_run = forms.BooleanField(required=False)
    all_sessions = forms.BooleanField(required=False)
