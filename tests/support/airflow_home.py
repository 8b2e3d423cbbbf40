"""One throwaway Airflow home for the whole test session, in place before anything imports Airflow.

Airflow reads ``$AIRFLOW_HOME/airflow.cfg`` (or ``$AIRFLOW_CONFIG``) once, at its first import, and ``AIRFLOW__*``
variables on every lookup. A developer's home (``make demo`` writes ``.airflow/airflow.cfg``, and the Makefile exports
``AIRFLOW_HOME`` for every target) or a deployment's variables in the shell would otherwise decide operator defaults
such as ``[operators] default_deferrable``. ``tests/conftest.py`` imports this module first: the session gets an
empty home of its own and no inherited ``AIRFLOW__*`` variable; tests set what they need themselves.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

HOME = Path(tempfile.mkdtemp(prefix="dpone-airflow-home-"))
atexit.register(shutil.rmtree, HOME, True)

for _name in [name for name in os.environ if name.startswith("AIRFLOW__")]:
    del os.environ[_name]
os.environ["AIRFLOW_HOME"] = str(HOME)
os.environ["AIRFLOW_CONFIG"] = str(HOME / "airflow.cfg")
os.environ["AIRFLOW__DPONE__SINGLE_WORKER"] = "True"  # every task try of the session runs on this one machine
