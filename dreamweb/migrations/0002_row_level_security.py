from django.db import migrations

from dreamweb.rls import rls_operations


class Migration(migrations.Migration):
    dependencies = [("dreamweb", "0001_initial")]

    operations = [
        *rls_operations("dreamweb_team", column="id"),
        *rls_operations("dreamweb_membership", "dreamweb_agentkey"),
    ]
