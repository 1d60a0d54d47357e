"""Forms of the memory browser."""

from __future__ import annotations

from django import forms

from .. import services
from ..models import EntryStatus

PER_PAGE = 50


class EntrySearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")
    scope = forms.ChoiceField(required=False)
    status = forms.ChoiceField(
        required=False,
        choices=[
            ("active", "Active"),
            ("expired", "Expired"),
            ("pinned", "Pinned"),
            ("superseded", "Superseded"),
            ("archived", "Archived"),
            ("all", "All"),
        ],
        initial="active",
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


DATETIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"]


class TextareaField(forms.CharField):
    """Text typed in a textarea. Browsers send its line ends as CRLF and the form strips the text, so a text sent
    back as it was shown counts as unchanged whatever its line ends and surrounding whitespace (an edit that changes
    nothing writes no version); what was typed is kept as sent."""

    def has_changed(self, initial, data):
        try:
            typed = self.to_python(data)
        except forms.ValidationError:
            return True
        return _same_text(initial) != _same_text(typed)


def _same_text(text) -> str:
    return (text or "").replace("\r\n", "\n").strip()


class EntryForm(forms.Form):
    """Create or edit an entry. ``base_version`` is the version the form was loaded with (edit only): a save against
    an entry changed meanwhile is refused and the form comes back with the person's text and the current state."""

    key = forms.CharField(max_length=200, help_text="Stable within the store; agents and dreams refer to it.")
    content = TextareaField(widget=forms.Textarea(attrs={"rows": 8}), help_text="The lesson, as prose for a prompt.")
    scope_agent = forms.CharField(required=False, max_length=100, label="Agent", help_text="Empty: every agent.")
    scope_task = forms.CharField(required=False, max_length=100, label="Task", help_text="Empty: every task.")
    tags = forms.CharField(required=False, max_length=1000, help_text="Comma-separated.")
    valid_from = forms.DateTimeField(
        required=False,
        input_formats=DATETIME_FORMATS,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="Not served before (UTC). Empty: at once.",
    )
    valid_until = forms.DateTimeField(
        required=False,
        input_formats=DATETIME_FORMATS,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="Expires then (UTC): no longer served, and a dream proposes renewal or removal. Empty: never.",
    )
    reason = forms.CharField(required=False, max_length=2000, help_text="Why: kept with the version.")
    base_version = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def __init__(self, *args, editing: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.editing = editing
        if editing:
            del self.fields["key"]

    def clean_content(self) -> str:
        # The size rule is the service's (memory.services.content_oversize); checked here too so that the error sits
        # at the text box, in words a person reads, with what was typed kept.
        content = self.cleaned_data["content"]
        if over := services.content_oversize(content):
            size, limit = over
            raise forms.ValidationError(
                f"Too long: an entry holds at most {limit:,} bytes, and this text is {size:,} bytes "
                f"({len(content):,} characters). Shorten it by {size - limit:,} bytes (a plain letter is 1 byte, "
                "an accented letter 2, an emoji 4)."
            )
        return content

    def clean_tags(self) -> list[str]:
        raw = self.cleaned_data.get("tags") or ""
        return [t.strip() for t in raw.split(",") if t.strip()][:50]

    def clean(self):
        cleaned = super().clean()
        start, end = cleaned.get("valid_from"), cleaned.get("valid_until")
        if start and end and end <= start:
            self.add_error("valid_until", "Must be later than “valid from”.")
        if self.editing and not cleaned.get("base_version"):
            self.add_error(None, "The form lost the version it was opened at: open the entry again.")
        return cleaned


class EntryActionForm(forms.Form):
    """Archive, restore, pin or unpin: the version the page showed, and an optional reason."""

    base_version = forms.IntegerField(min_value=1)
    reason = forms.CharField(required=False, max_length=2000)
