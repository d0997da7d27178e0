"""``python -m pytest_evomemory.cli``: the ``evomemory`` command without its script."""

import sys

from . import main

sys.exit(main())
