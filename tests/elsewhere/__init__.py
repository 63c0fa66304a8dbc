"""Modules of tasks in no installed app and in no BOSON setting: a third-party package's
tasks (Wagtail's search tasks live in ``modelsearch.tasks``), found by their path."""
