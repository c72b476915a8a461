"""schedsearch: find fast schedules for Exo procedures automatically."""

__version__ = "0.1.0"
