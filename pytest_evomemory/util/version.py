"""The package's version, declared once: ``pyproject.toml`` reads it from here
(``[tool.setuptools.dynamic]``), the package exports it and ``evomemory --version``
prints it, so the three cannot disagree."""

__version__ = "0.1.0"
