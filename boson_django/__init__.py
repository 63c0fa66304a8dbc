"""boson_django: a durable background-job queue stored in your Django database."""

__version__ = "0.1.0"
