from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0008_store_content_version"),
    ]

    operations = [
        migrations.AddField(
            model_name="memorystore",
            name="agents",
            field=models.JSONField(blank=True, default=list, help_text="Agent names this store serves (empty: all)."),
        ),
    ]
