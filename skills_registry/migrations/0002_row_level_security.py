from django.db import migrations

from dreamweb.rls import rls_operations


class Migration(migrations.Migration):
    dependencies = [("skills_registry", "0001_initial"), ("dreamweb", "0002_row_level_security")]

    operations = rls_operations("skills_registry_skill", "skills_registry_skillversion")
