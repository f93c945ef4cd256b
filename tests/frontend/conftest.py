"""Keep Hypothesis's cache out of the repository (it would create ./.hypothesis)."""

import tempfile
from pathlib import Path

from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "uttera-frontend-hypothesis")
