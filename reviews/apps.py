from django.apps import AppConfig
from django.db.models.signals import post_save


class ReviewsConfig(AppConfig):
    name = "reviews"

    def ready(self) -> None:
        from memory.models import MemoryEntry
        from skills_registry.models import Skill

        from . import signals

        post_save.connect(signals.entry_saved, sender=MemoryEntry, dispatch_uid="reviews-recheck-entry")
        post_save.connect(signals.skill_saved, sender=Skill, dispatch_uid="reviews-recheck-skill")
