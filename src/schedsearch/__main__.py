"""``python -m schedsearch`` is the ``schedsearch`` command."""

from schedsearch.cli.main import main

main()
