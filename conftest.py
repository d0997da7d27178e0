"""Repository-wide pytest configuration.

``pytester`` is enabled in pyproject's addopts; the test suites keep their own
fixtures in ``tests/**/conftest.py``. Nothing here is needed by users of the plugin.
"""
