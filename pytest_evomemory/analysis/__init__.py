"""The figures a run is judged on, computed: no page, no terminal line, no file.

What the engine (runtime/) and the renderers (reporting/) both need sits here,
below both: each stream's metrics and the summary (:mod:`.summary`), the accuracy
thresholds and gain gates (:mod:`.summary`, :mod:`.gain`), the category table
(:mod:`.categories`), the statistics of one run and across replicates
(:mod:`.stats`, :mod:`.clustered`), power (:mod:`.power`) and the gain versus
recall similarity (:mod:`.similarity`). These modules import neither the engine
nor the renderers (tests/test_import_graph.py checks).
"""
