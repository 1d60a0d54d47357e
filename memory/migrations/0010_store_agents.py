from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0009_session_scale_indexes_and_retention"),
    ]

    operations = [
        migrations.AddField(
            model_name="memorystore",
            name="agents",
            field=models.JSONField(blank=True, default=list, help_text="Agent names this store serves (empty: all)."),
        ),
    ]
