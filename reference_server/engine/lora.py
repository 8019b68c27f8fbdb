"""Multi-LoRA on the reference model: adapters in host memory, `max_loras` slots beside the weights,
and one forward pass over rows of different adapters.

    adapters = load_adapters(modules, arch, max_lora_rank, seed, dtype)   {name: LoraAdapter}, host memory
    bank = LoraBank(model, adapters, slots, max_lora_rank)    wraps the model's linear layers (slots: LoraSlots)
    bank.prepare(row_adapters, device)                        before each forward pass: load, set the rows

Every linear layer of every decoder layer (q|k|v, o, gate|up, down: vLLM's default targets for Llama)
becomes `LoraLinear`: base(x) plus, for each adapter in the step, its rows' x @ A @ B (the scaling
folded into B). The rows of one adapter are gathered, multiplied by that slot's A and B, and added
back: a segmented gather-matmul-scatter, as Punica's SGMV does it, in torch. Rows of the base model
get nothing added, so a base request's outputs are the model's own, with or without LoRA enabled.

q|k|v and gate|up are fused matrices: an adapter's per-projection pairs are stacked, A side by side
([in, 3r]) and B block-diagonal ([3r, q + k + v]), so one product serves the fused layer. A slot holds
the largest rank (`max_lora_rank`); a smaller adapter is zero-padded, which adds nothing.

Adapters are seeded random low-rank pairs (`random` or `random:RANK`) or a PEFT directory
(`adapter_config.json` + `adapter_model.safetensors`, `lora_A`/`lora_B` per target module, scaling
`lora_alpha / r`). Loading into a slot is a copy from host memory, timed: that is a cold adapter's cost.
"""

from __future__ import annotations

import json
import re
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from engine_core.architecture import ModelArchitecture
from calculators.lora import projection_shapes
from reference_server.engine.lora_sources import adapter_rank, peft_config
from engine_core.scheduling.lora_slots import LoraSlots

TARGETS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")   # our fused names
PARTS = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "o_proj": ("o_proj",),
         "gate_up_proj": ("gate_proj", "up_proj"), "down_proj": ("down_proj",)}   # PEFT's (HF Llama) names
PEFT_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+_proj)\.lora_([AB])\.weight$")


@dataclass
class LoraAdapter:
    """One adapter in host memory: per layer and target, A [in, parts * rank] and B [parts * rank, out]."""

    name: str
    rank: int
    source: str
    weights: list[dict[str, tuple[torch.Tensor, torch.Tensor]]]   # [layer] -> target -> (A, B)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes + b.nbytes for layer in self.weights for a, b in layer.values())


def _fuse(pairs: list[tuple[torch.Tensor, torch.Tensor]], rank: int, outs: list[int], scaling: float,
          dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-projection (A [in, r], B [r, out]) -> A [in, parts * r], B block-diagonal [parts * r, sum(outs)]."""
    a = torch.cat([pa for pa, _ in pairs], dim=1)
    b = torch.zeros(len(pairs) * rank, sum(outs))
    col = 0
    for k, ((_, pb), out) in enumerate(zip(pairs, outs)):
        b[k * rank:(k + 1) * rank, col:col + out] = pb * scaling
        col += out
    return a.to(dtype).contiguous(), b.to(dtype).contiguous()


def random_adapter(name: str, rank: int, arch: ModelArchitecture, seed: int, dtype: torch.dtype) -> LoraAdapter:
    """Seeded pairs on every target, the same (name, seed) giving the same adapter anywhere: A ~ N(0, 1/in)
    and B ~ N(0, 0.02), so that x @ A @ B is as large as a rank-`rank` slice of a layer whose weights are
    N(0, 0.02) like the presets': an adapter that changes outputs as a fine-tune does, more on a narrow
    model than on a wide one (by sqrt(rank / in))."""
    generator = torch.Generator().manual_seed(seed ^ zlib.crc32(name.encode()))
    shapes = projection_shapes(arch)
    layers = []
    for _ in range(arch.num_layers):
        layer = {}
        for target, parts in PARTS.items():
            pairs = [(torch.empty(shapes[p][0], rank).normal_(0, shapes[p][0] ** -0.5, generator=generator),
                      torch.empty(rank, shapes[p][1]).normal_(0, 0.02, generator=generator)) for p in parts]
            layer[target] = _fuse(pairs, rank, [shapes[p][1] for p in parts], 1.0, dtype)
        layers.append(layer)
    return LoraAdapter(name, rank, f"random:{rank}", layers)


def peft_adapter(name: str, directory: str, arch: ModelArchitecture, dtype: torch.dtype) -> LoraAdapter:
    """A PEFT LoRA directory; ValueError names what is missing or does not fit the model."""
    from safetensors.torch import load_file

    config = peft_config(name, directory)
    path = Path(directory)
    rank, alpha = int(config["r"]), float(config.get("lora_alpha", config["r"]))
    files = sorted(path.glob("*.safetensors"))
    found: dict[tuple[int, str, str], torch.Tensor] = {}
    for file in files:
        for key, tensor in load_file(str(file)).items():
            match = PEFT_KEY.search(key)
            if match:
                found[(int(match[1]), match[2], match[3])] = tensor.float()
    if not found:
        raise ValueError(f"lora_modules: adapter {name!r}: no lora_A/lora_B weights of decoder layers in {directory}")
    shapes = projection_shapes(arch)
    layers = []
    for layer_index in range(arch.num_layers):
        layer = {}
        for target, parts in PARTS.items():
            pairs = []
            for part in parts:
                d_in, d_out = shapes[part]
                a, b = found.get((layer_index, part, "A")), found.get((layer_index, part, "B"))
                if a is None or b is None:   # not a target of this adapter: adds nothing
                    a, b = torch.zeros(rank, d_in), torch.zeros(d_out, rank)
                if a.shape != (rank, d_in) or b.shape != (d_out, rank):
                    raise ValueError(f"lora_modules: adapter {name!r}: layer {layer_index} {part} has lora_A "
                                     f"{tuple(a.shape)} and lora_B {tuple(b.shape)}; the model needs "
                                     f"({rank}, {d_in}) and ({d_out}, {rank})")
                pairs.append((a.T, b.T))
            layer[target] = _fuse(pairs, rank, [shapes[p][1] for p in parts], alpha / rank, dtype)
        layers.append(layer)
    return LoraAdapter(name, rank, str(path), layers)


def load_adapters(modules: tuple[tuple[str, str], ...], arch: ModelArchitecture, max_lora_rank: int, seed: int,
                  dtype: torch.dtype) -> dict[str, LoraAdapter]:
    """`--lora-modules NAME=SOURCE ...` into host memory; ValueError names an adapter that cannot serve."""
    adapters = {}
    for name, source in modules:
        rank = adapter_rank(name, source, max_lora_rank)
        adapters[name] = random_adapter(name, rank, arch, seed, dtype) if source.startswith("random") \
            else peft_adapter(name, source, arch, dtype)
    return adapters


def save_peft_adapter(directory: str | Path, arch: ModelArchitecture, rank: int, seed: int, *, alpha: float = 16.0,
                      targets: tuple[str, ...] = ("q_proj", "v_proj")) -> Path:
    """Write a seeded PEFT-format adapter (what `peft` saves for a Llama model) into `directory`."""
    from safetensors.torch import save_file

    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    shapes = projection_shapes(arch)
    tensors = {}
    for layer in range(arch.num_layers):
        for target in targets:
            d_in, d_out = shapes[target]
            block = "self_attn" if target in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
            prefix = f"base_model.model.model.layers.{layer}.{block}.{target}"
            tensors[f"{prefix}.lora_A.weight"] = torch.empty(rank, d_in).normal_(0, 0.02, generator=generator)
            tensors[f"{prefix}.lora_B.weight"] = torch.empty(d_out, rank).normal_(0, 0.02, generator=generator)
    save_file(tensors, str(path / "adapter_model.safetensors"))
    (path / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "r": rank, "lora_alpha": alpha, "target_modules": list(targets),
        "base_model_name_or_path": arch.name, "bias": "none", "task_type": "CAUSAL_LM"}, indent=1) + "\n")
    return path


class StepSegments:
    """This step's rows per slot: [(slot, row indices)], shared by every LoraLinear of the model."""

    def __init__(self) -> None:
        self.segments: list[tuple[int, torch.Tensor]] = []


class LoraLinear(nn.Module):
    """base(x) + for each (slot, rows) of the step: x[rows] @ A[slot] @ B[slot], added into those rows."""

    def __init__(self, base: nn.Module, step: StepSegments, slots: int, d_in: int, width: int, d_out: int,
                 dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.base = base
        self.step = step
        self.register_buffer("lora_a", torch.zeros(slots, d_in, width, dtype=dtype, device=device))    # [S, in, R]
        self.register_buffer("lora_b", torch.zeros(slots, width, d_out, dtype=dtype, device=device))   # [S, R, out]

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # x: [T, in]
        y = self.base(x)
        for slot, rows in self.step.segments:
            y.index_add_(0, rows, (x.index_select(0, rows) @ self.lora_a[slot]) @ self.lora_b[slot])
        return y


class LoraBank:
    """The model's LoRA slots: its linear layers wrapped, adapters copied in as steps need them."""

    def __init__(self, model: nn.Module, adapters: dict[str, LoraAdapter], slots: LoraSlots,
                 max_lora_rank: int) -> None:
        self.adapters = adapters
        self.slots = slots
        max_loras = slots.max_loras
        self.step = StepSegments()
        self.layers: list[dict[str, LoraLinear]] = []
        param = next(model.parameters(), None)
        dtype = model.norm.weight.dtype
        device = model.norm.weight.device if param is None else param.device
        arch = model.arch
        shapes = projection_shapes(arch)
        for layer in model.layers:
            wrapped = {}
            for parent in (layer.self_attn, layer.mlp):
                for target in TARGETS:
                    if hasattr(parent, target):
                        parts = PARTS[target]
                        lora = LoraLinear(getattr(parent, target), self.step, max_loras, shapes[parts[0]][0],
                                          len(parts) * max_lora_rank, sum(shapes[p][1] for p in parts), dtype, device)
                        setattr(parent, target, lora)
                        wrapped[target] = lora
            self.layers.append(wrapped)
        self.max_lora_rank = max_lora_rank
        self.last_load_s = 0.0
        self.last_loaded: tuple[str, ...] = ()

    @torch.no_grad()
    def _load(self, name: str, slot: int) -> None:
        adapter = self.adapters[name]
        r, big = adapter.rank, self.max_lora_rank
        for wrapped, weights in zip(self.layers, adapter.weights):
            for target, lora in wrapped.items():
                a, b = weights[target]
                parts = len(PARTS[target])
                lora.lora_a[slot].zero_()
                lora.lora_b[slot].zero_()
                for k in range(parts):   # part k's rank columns go to its own block of the slot's width
                    lora.lora_a[slot, :, k * big:k * big + r].copy_(a[:, k * r:(k + 1) * r], non_blocking=False)
                    lora.lora_b[slot, k * big:k * big + r].copy_(b[k * r:(k + 1) * r], non_blocking=False)

    def prepare(self, row_adapters: list[str | None], device: torch.device) -> None:
        """Slots for the step's adapters (`row_adapters`: each row's, None for the base model), the cold
        ones loaded (timed), then each slot's rows set for the forward pass."""
        activation = self.slots.activate(row_adapters)
        start = time.perf_counter()
        for name in activation.loaded:
            self._load(name, activation.slot_of[name])
        if device.type == "cuda" and activation.loaded:
            torch.cuda.synchronize(device)
        self.last_load_s = time.perf_counter() - start if activation.loaded else 0.0
        self.last_loaded = activation.loaded
        rows: dict[int, list[int]] = {}
        for row, name in enumerate(row_adapters):
            if name is not None:
                rows.setdefault(activation.slot_of[name], []).append(row)
        self.step.segments = [(slot, torch.tensor(indices, dtype=torch.long, device=device))
                              for slot, indices in rows.items()]

    def describe(self) -> dict:
        """The /v1/engine `lora` block: the slots, and every adapter with its rank, source and bytes."""
        return {"max_loras": self.slots.max_loras, "max_lora_rank": self.max_lora_rank, "slot_bytes": self.slot_bytes,
                "adapters": {name: {"rank": a.rank, "source": a.source, "bytes": a.nbytes}
                             for name, a in self.adapters.items()}}

    @property
    def slot_bytes(self) -> int:
        return sum(lora.lora_a.nbytes + lora.lora_b.nbytes for layer in self.layers for lora in layer.values())
