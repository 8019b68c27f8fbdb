"""Quantized weights for the reference model: int8 with one scale per output channel.

    quantize_model(model, "int8" | "int8-dynamic")      in place, after the weights are loaded
    weight_bytes(model) -> the bytes the model's weights take (each tensor once: tied ones share)

Both methods store every linear layer's weight, the embedding and the output head as int8, each
row (output channel) with its own scale: w ~ q * scale, q = round(w / scale) in [-127, 127],
scale = max |w| of the row / 127. Norms stay as they were. They differ in how a linear layer runs:

    int8          weight-only: the activations stay in the model's dtype and torch's int8 weight
                  kernel (`torch._weight_int8pack_mm`, gpt-fast's) multiplies them by the int8 rows
                  and their scales; a dtype and device it has no kernel for are refused
                  (`require_kernel`), not run by dequantizing every step.
    int8-dynamic  torch's dynamic quantization (fbgemm on x86 CPUs): each step's activations are
                  quantized to int8 per tensor on the fly and the matmul runs in int8 (W8A8);
                  float32 on a CPU only. The embedding and the output head are int8 weight-only.

`docs/results.md` has the two measured against float32; the KV cache is not quantized.
"""

from __future__ import annotations

import torch
from torch import nn

from reference_server.engine.config import QUANTIZATIONS


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 rows [N, K], their scales [N] in the weight's dtype): symmetric, one scale per row."""
    w = weight.detach().float()
    scales = (w.abs().amax(dim=1) / 127.0).clamp(min=torch.finfo(torch.float32).tiny)
    q = torch.round(w / scales[:, None]).clamp_(-127, 127).to(torch.int8)
    return q, scales.to(weight.dtype)


def _has_int8_kernel(dtype: torch.dtype, device: torch.device) -> bool:
    if not hasattr(torch, "_weight_int8pack_mm"):
        return False
    try:
        a = torch.ones(1, 32, dtype=dtype, device=device)
        torch._weight_int8pack_mm(a, torch.ones(8, 32, dtype=torch.int8, device=device),
                                  torch.ones(8, dtype=dtype, device=device))
        return True
    except (RuntimeError, NotImplementedError):
        return False


def require_kernel(method: str, dtype: torch.dtype, device: torch.device) -> None:
    """ValueError unless `method` has its kernel for `dtype` on `device` in this torch."""
    engines = set(torch.backends.quantized.supported_engines)
    if method == "int8-dynamic" and not {"fbgemm", "x86"} & engines:   # float32 on a CPU: EngineConfig's rule
        raise ValueError("quantization int8-dynamic: this torch has no x86 quantized engine (fbgemm)")
    if not _has_int8_kernel(dtype, device):
        raise ValueError(f"quantization {method}: this torch has no int8 weight kernel (_weight_int8pack_mm) for "
                         f"{str(dtype).removeprefix('torch.')} on {device.type}")


class Int8Linear(nn.Module):
    """y = x @ (q * scale)^T with int8 rows `q` [N, K] and their scales [N] (no bias: the model has none),
    by torch's int8 weight kernel."""

    def __init__(self, q: torch.Tensor, scales: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("weight_int8", q)
        self.register_buffer("scales", scales)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        out = torch._weight_int8pack_mm(x.reshape(-1, shape[-1]).contiguous(), self.weight_int8, self.scales)
        return out.reshape(*shape[:-1], -1)


class Int8Embedding(nn.Module):
    """An embedding table of int8 rows, each with its scale: a lookup dequantizes the rows it reads."""

    def __init__(self, q: torch.Tensor, scales: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("weight_int8", q)
        self.register_buffer("scales", scales)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.weight_int8[ids].to(self.scales.dtype) * self.scales[ids].unsqueeze(-1)


def quantize_model(model: nn.Module, method: str) -> None:
    """Replace the model's linear layers, embedding and output head by int8 ones (`method`: QUANTIZATIONS)."""
    if method not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}, got {method!r}")
    require_kernel(method, model.embed_tokens.weight.dtype, model.embed_tokens.weight.device)
    tied = model.lm_head.weight is model.embed_tokens.weight
    embed_q, embed_scales = quantize_rows(model.embed_tokens.weight)
    model.embed_tokens = Int8Embedding(embed_q, embed_scales)
    if tied:   # the head reads the same int8 rows
        model.lm_head = Int8Linear(embed_q, embed_scales)
    else:
        model.lm_head = Int8Linear(*quantize_rows(model.lm_head.weight))
    for layer in model.layers:
        if method == "int8-dynamic":
            torch.ao.quantization.quantize_dynamic(   # per output channel, as the weight-only rows
                layer, {nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True)
            continue
        for parent in (layer.self_attn, layer.mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.Linear):
                    setattr(parent, name, Int8Linear(*quantize_rows(child.weight)))


def weight_bytes(model: nn.Module) -> int:
    """The bytes of the model's weights, each storage once: parameters, int8 rows and scales, and the
    packed weights of dynamically quantized layers (the rope tables, which are not weights, left out)."""
    seen: set[int] = set()
    total = 0

    def count(tensor: torch.Tensor) -> None:
        nonlocal total
        key = tensor.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            total += tensor.untyped_storage().nbytes()

    for tensor in model.parameters():
        count(tensor)
    for name, tensor in model.named_buffers():
        if not name.startswith("rope_"):
            count(tensor)
    for module in model.modules():   # dynamic quantization keeps its int8 weights packed
        if isinstance(module, torch.ao.nn.quantized.dynamic.Linear):
            weight, bias = module.weight(), module.bias()
            total += weight.int_repr().nbytes
            if weight.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
                total += weight.q_per_channel_scales().nbytes   # float64, one a row
            if bias is not None:
                total += bias.nbytes
    return total
