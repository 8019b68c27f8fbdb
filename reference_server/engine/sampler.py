"""Turn one step's logits into one token per sequence, all rows in one pass.

Greedy rows take the argmax; the others sample by inverse CDF over temperature-scaled,
top-p-truncated probabilities. Each row's uniform draw comes from the request's own
generator when it gave a seed (so its tokens do not depend on what it was batched with),
else from the engine's seeded generator.

`verify` is speculative decoding's acceptance. A greedy request keeps the proposals the target's
argmax agrees with, then the target's own next token (`scheduling.speculative.accept_greedy`). A
sampled one takes the standard rejection sampling, with the proposals' distribution q one-hot (the
proposers here are deterministic: prompt lookup, a greedy draft): proposal d at a position is kept
with chance min(1, p(d) / q(d)) = p(d), p the target's distribution there after temperature and
top-p; the first one rejected is replaced by a draw from the residual max(0, p - q), normalised (p
without d); when all are kept, one more token is drawn from p after the last. Every kept token is
then distributed as the target's own sampling would have it.
"""

from __future__ import annotations

import torch

from engine_core.scheduling.sequence import Sequence
from engine_core.scheduling.speculative import accept_greedy


class Sampler:
    def __init__(self, seed: int, eos_id: int | None) -> None:
        self.eos_id = eos_id
        self.generator = torch.Generator().manual_seed(seed)
        self._request_generators: dict[str, torch.Generator] = {}

    def forget(self, request_id: str) -> None:
        self._request_generators.pop(request_id, None)

    def __call__(self, logits: torch.Tensor, seqs: list[Sequence]) -> list[int]:
        """logits: [N, V] (any device/dtype) for `seqs` in order -> N token ids."""
        logits = logits.float().cpu()
        self._suppress_early_stops(logits, seqs)
        greedy_ids = logits.argmax(dim=-1)
        if all(seq.params.greedy for seq in seqs):
            return greedy_ids.tolist()
        sorted_probs, sorted_ids = self._nucleus(logits, seqs)
        cdf = sorted_probs.cumsum(dim=-1)                                       # [N, V]
        uniform = torch.cat([torch.rand(1, generator=self._generator_for(seq)) for seq in seqs])
        choice = torch.searchsorted(cdf, (uniform * cdf[:, -1]).unsqueeze(1)).clamp_(max=cdf.shape[1] - 1)
        sampled_ids = sorted_ids.gather(1, choice).squeeze(1)
        greedy = torch.tensor([seq.params.greedy for seq in seqs])
        return torch.where(greedy, greedy_ids, sampled_ids).tolist()

    @staticmethod
    def _nucleus(logits: torch.Tensor, seqs: list[Sequence]) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's temperature-scaled probabilities, sorted, outside the top-p nucleus zeroed (not
        renormalised); and the token ids in that order."""
        temperature = torch.tensor([seq.params.temperature or 1.0 for seq in seqs]).unsqueeze(1)
        probs = torch.softmax(logits / temperature, dim=-1)                    # [N, V]
        sorted_probs, sorted_ids = probs.sort(dim=-1, descending=True)
        top_p = torch.tensor([seq.params.top_p for seq in seqs]).unsqueeze(1)
        cumulative = sorted_probs.cumsum(dim=-1)
        sorted_probs[(cumulative - sorted_probs) >= top_p] = 0.0               # keep the nucleus
        return sorted_probs, sorted_ids

    def verify(self, logits: torch.Tensor, seq: Sequence, proposals: list[int]) -> list[int]:
        """The tokens a verification step keeps: `logits` [k + 1, V] are the target's after the last
        token and after each of the k `proposals`."""
        if seq.params.greedy:
            return accept_greedy(proposals, logits.float().argmax(dim=-1).tolist())
        rows = logits.float().cpu()
        sorted_probs, sorted_ids = self._nucleus(rows, [seq] * len(rows))
        probs = torch.zeros_like(sorted_probs).scatter_(1, sorted_ids, sorted_probs)
        probs /= probs.sum(dim=-1, keepdim=True)                                # [k + 1, V], each row sums to 1
        generator = self._generator_for(seq)
        kept = []
        for position, proposed in enumerate(proposals):
            p = probs[position]
            if torch.rand(1, generator=generator).item() < p[proposed].item():
                kept.append(proposed)
                continue
            residual = p.clone()
            residual[proposed] = 0.0
            kept.append(_draw(residual, generator) if residual.sum() > 0 else proposed)
            return kept
        kept.append(_draw(probs[len(proposals)], generator))
        return kept

    def _generator_for(self, seq: Sequence) -> torch.Generator:
        if seq.params.seed is None:
            return self.generator
        generator = self._request_generators.get(seq.request_id)
        if generator is None:
            generator = torch.Generator().manual_seed(seq.params.seed)
            self._request_generators[seq.request_id] = generator
        return generator

    def _suppress_early_stops(self, logits: torch.Tensor, seqs: list[Sequence]) -> None:
        """Before min_tokens are out, EOS and stop ids cannot be chosen."""
        for row, seq in enumerate(seqs):
            if seq.num_output_tokens < seq.params.min_tokens:
                banned = [i for i in (self.eos_id, *seq.params.stop_token_ids) if i is not None and i < logits.shape[1]]
                logits[row, banned] = float("-inf")


def _draw(weights: torch.Tensor, generator: torch.Generator) -> int:
    """One token id with chance proportional to `weights` [V] (inverse CDF, as the batch draw does)."""
    cdf = weights.cumsum(dim=0)
    point = torch.rand(1, generator=generator) * cdf[-1]
    return int(torch.searchsorted(cdf, point).clamp_(max=len(cdf) - 1).item())
