from django.db import migrations

from dreamweb.rls import rls_operations


class Migration(migrations.Migration):
    dependencies = [("reviews", "0001_initial"), ("dreamweb", "0002_row_level_security")]

    operations = rls_operations(
        "reviews_autonomypolicy",
        "reviews_policychange",
        "reviews_dreamrun",
        "reviews_sessionanalysis",
        "reviews_proposal",
        "reviews_proposalevidence",
    )
