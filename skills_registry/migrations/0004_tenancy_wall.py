"""Unique (id, team) on skills; composite foreign keys keep versions in their skill's team (dreamweb.rls)."""

from django.db import migrations, models

from dreamweb.rls import same_team_foreign_keys


class Migration(migrations.Migration):

    dependencies = [
        ('dreamweb', '0004_tenancy_wall'),
        ('skills_registry', '0003_skill_front_matter_extra'),
    ]

    operations = [
        migrations.AddConstraint(
            model_name='skill',
            constraint=models.UniqueConstraint(fields=('id', 'team'), name='skill_id_team'),
        ),
        *same_team_foreign_keys(
            ("skills_registry_skillversion", "skill_id", "skills_registry_skill"),
            ("skills_registry_skillversion", "author_key_id", "dreamweb_agentkey"),
        ),
    ]
