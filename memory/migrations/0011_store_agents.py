from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0010_session_note_of_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="memorystore",
            name="agents",
            field=models.JSONField(blank=True, default=list, help_text="Agent names this store serves (empty: all)."),
        ),
    ]
