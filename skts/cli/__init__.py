"""Command line: ``skts demo|fit|apply|report`` (also ``python -m skts``).

Every command reads its inputs completely and checks them before it writes
anything; outputs go to a temporary file in the target folder that is renamed
into place, so a failure never leaves a truncated or half-written file. Errors
are one line on stderr and exit code 2.
"""

from skts.cli._entrypoint import main
from skts.cli._inputs import parse_temperatures

__all__ = ["main", "parse_temperatures"]
