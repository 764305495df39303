"""The ``openacl`` command."""
