from django.apps import AppConfig


class BosonConfig(AppConfig):
    name = "boson_django"
    verbose_name = "Boson queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from boson_django import checks, drivers, signals, taskresults  # noqa: F401  (registers checks and hooks)
        from boson_django.worker import embedded

        taskresults.use_django6_finished_logging()

        if embedded.should_autostart():
            embedded.start_with_first_request()
