"""A conflict's decision reason used to be stored as "<reviewer's reason> (not applied: <why>)", which the toast, the
card, the decided list and the API then showed inside their own "Not applied" / "Conflict" ("Not applied: (not
applied: ...)"). reviews.services.conflict_reason now stores "<why>; the reviewer's reason: <reason>"; this rewrites
the rows written before, so every place shows one sentence. The rule is restated here as it stood when this
migration was written (a migration must not follow later changes of the code)."""

import re

from django.db import migrations

OLD = re.compile(r"(?s)(.*?)\s*\(not applied: (.*)\)")


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # Migrations run as the tables' owner, for whom '*' means every team (dreamweb.rls).
        schema_editor.execute("SELECT set_config('dreamweb.team_ids', '*', true)")
    Proposal = apps.get_model("reviews", "Proposal")
    rows = Proposal.objects.filter(status="conflict", decision_reason__contains="(not applied: ")
    for pk, text in rows.values_list("pk", "decision_reason").iterator():
        match = OLD.fullmatch(text)
        if not match:
            continue
        reason, why = match.group(1).strip(), match.group(2).strip()
        new = f"{why}; the reviewer's reason: {reason}" if reason else why
        Proposal.objects.filter(pk=pk).update(decision_reason=new)


class Migration(migrations.Migration):
    dependencies = [("reviews", "0020_policy_rules_on_fields")]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
