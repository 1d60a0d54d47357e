from django.db import migrations

from dreamweb.rls import rls_operations


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial"), ("dreamweb", "0002_row_level_security")]

    operations = rls_operations(
        "memory_memorystore",
        "memory_memoryentry",
        "memory_memoryversion",
        "memory_agentsession",
        "memory_contextserve",
        "memory_feedback",
    )
