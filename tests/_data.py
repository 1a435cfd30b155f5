"""Where the real CIFAR logits are: ``$SKTS_DATA`` or ``../shared/data``
beside the repository (docs/data.md); tests that need them skip otherwise."""

import os
from pathlib import Path

DATA = Path(
    os.environ.get("SKTS_DATA")
    or Path(__file__).resolve().parents[2] / "shared" / "data"
)
MISSING = (
    "the real CIFAR logits are neither in ../shared/data nor in $SKTS_DATA "
    "(docs/data.md says where they come from)"
)
