"""Hedged requests (`--hedge-after`) per level: how many were hedged, which copy was kept, what the copies cost.

    hedge_stats(frame) -> HedgeStats | None      (contract.level_result)

`frame`: a level's measure records, every status. A hedged pair is two records (`hedge` "primary" and
"copy"), one kept and the other `cancelled`; a request not hedged has no `hedge`. The users' requests are the
records less the copies; the copies are the extra requests the policy sent. None when nothing was hedged.
"""

from __future__ import annotations

import pandas as pd

from contract.level_result import HedgeStats


def hedge_stats(frame: pd.DataFrame) -> HedgeStats | None:
    if "hedge" not in frame or frame["hedge"].isna().all():
        return None
    role = frame["hedge"].astype(object)
    status = frame["status"].astype(object)
    copies = int((role == "copy").sum())
    requests = int(len(frame) - copies)
    kept = int(((role == "copy") & (status == "ok")).sum())
    return HedgeStats(requests=requests, hedged=copies, hedged_share=copies / requests if requests else None,
                      copies_kept=kept, cancelled=int((status == "cancelled").sum()),
                      extra_requests=copies / requests if requests else None)
