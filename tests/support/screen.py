"""An output stream that says it is a terminal, for what the CLI draws only for a person."""

from __future__ import annotations

import io


class Screen(io.StringIO):
    """An output stream that says it is a terminal (its width comes from ``COLUMNS``)."""

    def isatty(self) -> bool:
        return True
