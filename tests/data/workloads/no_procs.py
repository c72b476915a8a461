"""A file without any @proc."""

VALUE = 3
