"""An MoE replica laid out beyond tensor parallelism: data-parallel attention and expert parallelism.

vLLM (`--data-parallel-size D --enable-expert-parallel`, its "Data Parallel Deployment" and "Expert
Parallel Deployment" docs) and TensorRT-LLM (`--tp N --ep N` with `enable_attention_dp: true`, the
"DEP N" of its perf overview) run a large MoE model as one replica of tp x dp GPUs:
- attention and every layer the ranks do not share (embeddings, dense MLPs, shared experts, the output
  head) tensor-parallel over tp GPUs and copied on each of the dp ranks; a rank runs its own sequences
  and holds their KV cache, under its own batching limits (each rank is an engine core);
- the routed experts over all tp x dp GPUs: cut tp x dp ways (a sharded MoE layer), or, with expert
  parallelism, whole: num_experts / (tp x dp) experts a GPU.

Per GPU, for a step of B tokens on the replica, spread evenly over the ranks (TensorRT-LLM's
attention_dp_config.enable_balance, vLLM's DP coordinator): the attention side sees B / dp tokens and
reads its weights / tp; the experts see every token's k experts, spread over the tp x dp GPUs.

Communication of one forward pass over B tokens, G = tp x dp:
    the ranks' all-reduces      (attention + dense MLP layers) x all-reduce of B / dp tokens over tp
    an MoE layer, sharded       dp = 1: an all-reduce of B tokens over tp (Megatron's, as before);
                                dp > 1: an all-reduce of all B tokens over the G GPUs (the ranks
                                gather their tokens for the shared layer and take theirs back)
    an MoE layer, expert parallel   a dispatch and a combine all-to-all; each GPU sends its B / G
                                tokens' k copies of the hidden state (16-bit), (G - 1) / G of them to
                                other GPUs: 2 x (latency + bytes / (link x link efficiency))
The link is the GPU's NVLink (`GpuSpec.interconnect_bytes_per_s`): all G GPUs in one NVLink domain (one
node, or an NVL72 rack); across nodes the network would be the link, which is not modelled. A dense
model's ranks share no layer: they are replicas (`--replicas`), refused here.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.checks import positive_int
from engine_core.architecture import ModelArchitecture
from engine_core.gpus import GpuSpec
from calculators.efficiency import Efficiencies
from calculators.tp_comm import ACTIVATION_BYTES, allreduce_s


@dataclass(frozen=True)
class MoeLayout:
    """dp attention ranks (1: none) and whether the routed experts are whole on each GPU."""

    dp: int = 1
    expert_parallel: bool = False

    def __post_init__(self) -> None:
        positive_int("dp", self.dp)

    @classmethod
    def from_args(cls, args) -> "MoeLayout":
        """--dp and --expert-parallel (engine_core.options), where the command takes them."""
        return cls(dp=getattr(args, "dp", None) or 1, expert_parallel=bool(getattr(args, "expert_parallel", False)))

    @property
    def plain(self) -> bool:
        """Tensor parallelism alone: every formula as without a layout."""
        return self.dp == 1 and not self.expert_parallel

    def gpus(self, tp: int) -> int:
        return tp * self.dp

    def check(self, arch: ModelArchitecture, tp: int) -> None:
        """ValueError naming the flag when this layout cannot run `arch` at `tp`."""
        if self.plain:
            return
        if not arch.is_moe:
            raise ValueError(f"--dp and --expert-parallel lay out an MoE model's experts; {arch.name} is dense "
                             "(its data parallelism is more replicas)")
        group = self.gpus(tp)
        if self.expert_parallel and arch.num_experts % group:
            raise ValueError(f"--expert-parallel over {group} GPUs (--tp {tp} x --dp {self.dp}) needs a whole number "
                             f"of {arch.name}'s {arch.num_experts} experts on each")

    def comm_s(self, arch: ModelArchitecture, gpu: GpuSpec, tp: int, tokens: int, eff: Efficiencies) -> float:
        """Communication of one forward pass over `tokens` tokens of the replica (module docstring); 0 when
        `eff` was measured at this TP degree (its communication is inside its other terms)."""
        group = self.gpus(tp)
        if group == 1 or eff.tp_comm_measured:
            return 0.0
        if not gpu.interconnect_bytes_per_s:
            raise ValueError(f"gpu {gpu.name!r} has no interconnect bandwidth: {group} GPUs a replica need one "
                             "(--gpu-interconnect-gbs)")
        hidden = arch.hidden_size * ACTIVATION_BYTES
        moe_layers = arch.num_moe_layers
        rank_layers = arch.num_layers + (arch.num_layers - moe_layers)   # attention in each, dense MLPs
        rank_s = rank_layers * allreduce_s(tokens / self.dp * hidden, tp, gpu, eff)
        if not moe_layers:
            return rank_s
        if self.expert_parallel:
            sent = tokens / group * arch.num_active_experts * hidden * (group - 1) / group
            all_to_all = eff.allreduce_latency_s + sent / (gpu.interconnect_bytes_per_s * eff.link_efficiency)
            return rank_s + moe_layers * 2 * all_to_all
        if self.dp == 1:
            return rank_s + moe_layers * allreduce_s(tokens * hidden, tp, gpu, eff)
        return rank_s + moe_layers * allreduce_s(tokens * hidden, group, gpu, eff)


PLAIN = MoeLayout()
