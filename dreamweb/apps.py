from django.apps import AppConfig


class DreamwebConfig(AppConfig):
    name = "dreamweb"
    verbose_name = "Dreamweb tenancy"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from .rls import grant_app_role

        post_migrate.connect(grant_app_role, dispatch_uid="dreamweb.grant_app_role")
