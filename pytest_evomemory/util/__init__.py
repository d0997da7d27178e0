"""Text and file helpers that import nothing else of the package: text measures and
escaping, secret redaction, atomic file replacement, the start-up heap.

The lowest layer: the run documents (:mod:`pytest_evomemory.rundocs`) and everything above read them.
"""
