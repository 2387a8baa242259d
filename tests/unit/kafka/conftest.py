"""kafka-python reads its bundled message definitions with an importlib API that warns on
Python 3.11+; import it here, quietly, before the test modules do."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import tests.unit.kafka.kafka_python  # noqa: F401
