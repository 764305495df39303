"""Golden functions for CANN's ATK cases, one module per operator family.

Each module registers its operators' goldens with ``atk_driver.golden`` (the driver's
docstring says what a golden receives and returns); ``atk_driver.load_goldens`` imports
every module here.
"""
