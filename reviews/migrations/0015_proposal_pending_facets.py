"""The review queue's grouped scan of the pending cards (ProposalQuerySet.facets) answered from an index alone: every
column it reads, for pending rows only."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0014_prevalence_sources"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="proposal",
            index=models.Index(
                condition=models.Q(("status", "pending")),
                fields=["team", "store", "operation", "kind", "scope_agent", "risk"],
                name="proposal_pending_facets",
            ),
        ),
    ]
