"""Forms of the memory browser."""

from __future__ import annotations

from django import forms

from ..models import EntryStatus

PER_PAGE = 50


class EntrySearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")
    scope = forms.ChoiceField(required=False)
    status = forms.ChoiceField(
        required=False, choices=[("active", "Active"), ("archived", "Archived"), ("all", "All")], initial="active"
    )
    per = forms.IntegerField(required=False, min_value=1, max_value=500)

    def __init__(self, data, *, agents):
        super().__init__(data)
        self.fields["scope"].choices = [("", "Any scope"), ("_none", "Whole store (unscoped)")] + [
            (a, f"agent: {a}") for a in agents
        ]

    def filters(self) -> dict:
        self.is_valid()
        cleaned = {name: self.cleaned_data.get(name) for name in self.fields if name not in self.errors}
        cleaned["status"] = cleaned.get("status") or EntryStatus.ACTIVE
        cleaned["per"] = cleaned.get("per") or PER_PAGE
        return cleaned


class RevertForm(forms.Form):
    number = forms.IntegerField(min_value=1)
    base_version = forms.IntegerField(min_value=1)
    reason = forms.CharField(required=False, max_length=2000)
