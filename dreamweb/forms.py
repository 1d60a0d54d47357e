"""Forms of the tenancy pages."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils import timezone

from .models import DEFAULT_SCOPES, Role, Scope

ALL_STORES, ALL_STORES_LABEL = "*", "Every store that lets agents write"


def with_browser_limits(formfield, db_field):
    """``formfield`` with the browser's min/max taken from the model field's own MinValueValidator/MaxValueValidator.
    A PositiveIntegerField's form field says min="0" whatever its validators say ("at least 1"): the spinner would
    offer what the server refuses. Only the widget's attributes are set, so the server's refusal keeps the words of
    the model's validator (one rule, one message)."""
    if formfield is None or not isinstance(formfield.widget, forms.NumberInput):
        return formfield
    for validator in db_field.validators:
        limit = validator.limit_value
        if callable(limit):
            continue
        if isinstance(validator, MinValueValidator):
            now = formfield.widget.attrs.get("min")
            formfield.widget.attrs["min"] = limit if now is None else max(limit, now)
        elif isinstance(validator, MaxValueValidator):
            now = formfield.widget.attrs.get("max")
            formfield.widget.attrs["max"] = limit if now is None else min(limit, now)
    return formfield


def formfield_with_limits(db_field, **kwargs):
    """A ModelForm's ``formfield_callback``: the default form field, with with_browser_limits."""
    return with_browser_limits(db_field.formfield(**kwargs), db_field)


class AgentKeyForm(forms.Form):
    name = forms.SlugField(max_length=100, help_text="A name for people: which agent or fleet uses the key.")
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices, widget=forms.CheckboxSelectMultiple, initial=list(DEFAULT_SCOPES)
    )
    writable_stores = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Stores the key may write in-band (needs the memory:write scope).",
    )
    expires_in_days = forms.IntegerField(required=False, min_value=1, max_value=3650, help_text="Empty: never.")

    def __init__(self, *args, team, **kwargs):
        super().__init__(*args, **kwargs)
        names = team.store_names()
        self.fields["writable_stores"].choices = [(ALL_STORES, ALL_STORES_LABEL)] + list(names.items())

    def key_arguments(self) -> dict:
        days = self.cleaned_data.get("expires_in_days")
        return {
            "name": self.cleaned_data["name"],
            "scopes": self.cleaned_data["scopes"],
            "writable_stores": self.cleaned_data["writable_stores"],
            "expires_at": timezone.now() + timedelta(days=days) if days else None,
        }


class MemberAddForm(forms.Form):
    """Add an existing account to a team (dreamweb.members.add_member decides; its refusal goes on the identifier)."""

    identifier = forms.CharField(
        max_length=254,
        label="Username or e-mail",
        help_text="Someone who already has an account on this server.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.REVIEWER)

    def __init__(self, *args, **kwargs):
        # Ids of their own: the page's invitation form has a role select too.
        super().__init__(*args, auto_id="add-%s", **kwargs)
