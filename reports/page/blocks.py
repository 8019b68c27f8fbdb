"""What a report section is made of: a paragraph (str), a table (DataFrame), a figure (FigureFile),
or a collapsed group of those (`Details`: HTML <details>, which GitHub's Markdown renders too)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from reports.figures.common import FigureFile


@dataclass(frozen=True)
class Details:
    summary: str                              # the line shown while collapsed
    blocks: list = field(default_factory=list)


Block = str | pd.DataFrame | FigureFile | Details
