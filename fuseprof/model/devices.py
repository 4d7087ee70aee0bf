"""Datasheet ceilings of the GPUs fuseprof draws rooflines for, per pipe and precision.

Dense rates (no 2:4 structured sparsity), in base units (bytes/s, FLOP/s or OP/s); where a
datasheet prints only the sparse figure, the dense one is half of it (NVIDIA's footnote: "shown
with sparsity; specifications are one-half lower without sparsity"). Sources:
- H100 SXM5 and H100 PCIe: "NVIDIA H100 Tensor Core GPU" datasheet and the Hopper architecture
  whitepaper (table "NVIDIA H100 SXM5 and PCIe specifications"; FP16/BF16 non-tensor rows).
- H200 SXM: "NVIDIA H200 Tensor Core GPU" datasheet (4.8 TB/s HBM3e, 141 GB); its arithmetic is
  the H100 SXM5's (same GH100 die and clocks), which the datasheet's FP64/FP32/tensor rows repeat.
- A100 80GB SXM: "NVIDIA A100 Tensor Core GPU" datasheet (2,039 GB/s) and the Ampere
  architecture whitepaper (FP16 non-tensor 78 TFLOPS, BF16 non-tensor 39 TFLOPS); no FP8.
- B200 (HGX B200, 1,000 W): "NVIDIA Blackwell" datasheet, per-GPU column of HGX B200: 7.7 TB/s,
  FP64/FP64 tensor 37, FP32 75 TFLOPS; TF32 2.2, FP16/BF16 4.5, FP8 9 PFLOPS and INT8 9 POPS,
  all printed with sparsity and halved here. It prints no non-tensor FP16 rate: left out.

Pipes are keyed as in ``PIPES``: ``tensor_<precision>`` for the tensor cores by source
precision (the ``flops_tensor_*`` columns), ``fp16``/``fp32``/``fp64`` for the SIMT pipes (the
``flops_fp*`` columns; fp16 covers packed bf16 too, which runs at the same rate on these parts).
"""

from __future__ import annotations

from dataclasses import dataclass, field

T = 1e12

# pipe key -> label shown on charts; order = how a tie in dominant FLOPs is broken
PIPES: dict[str, str] = {
    "tensor_bf16": "BF16 tensor", "tensor_fp16": "FP16 tensor", "tensor_tf32": "TF32 tensor",
    "tensor_fp8": "FP8 tensor", "tensor_fp64": "FP64 tensor", "tensor_int8": "INT8 tensor",
    "fp16": "FP16/BF16 (SIMT)", "fp32": "FP32 (SIMT)", "fp64": "FP64 (SIMT)",
}


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    dram_bytes_per_s: float
    dense: dict[str, float]  # pipe -> peak FLOP/s (OP/s for int8) without sparsity
    source: str
    sparse: dict[str, float] = field(default_factory=dict)  # pipe -> peak with 2:4 sparsity

    def compute_roofs(self) -> dict[str, float]:
        return dict(self.dense)


def _hopper(name: str, dram: float, fp64: float, fp64_tc: float, fp32: float, fp16: float, tf32: float,
            bf16: float, fp8: float, source: str) -> DeviceSpec:
    dense = {"fp64": fp64 * T, "tensor_fp64": fp64_tc * T, "fp32": fp32 * T, "fp16": fp16 * T,
             "tensor_tf32": tf32 * T, "tensor_bf16": bf16 * T, "tensor_fp16": bf16 * T, "tensor_fp8": fp8 * T,
             "tensor_int8": fp8 * T}
    sparse = {k: 2 * v for k, v in dense.items() if k.startswith("tensor_") and k != "tensor_fp64"}
    return DeviceSpec(name, dram * T, dense, source, sparse)


DEVICES: dict[str, DeviceSpec] = {
    "H100 SXM": _hopper("H100 SXM", 3.35, 34, 67, 67, 133.8, 494.7, 989.4, 1978.9,
                        "H100 datasheet / Hopper whitepaper, SXM5"),
    "H100 PCIe": _hopper("H100 PCIe", 2.0, 25.6, 51.2, 51.2, 102.4, 378, 756.5, 1513,
                         "H100 datasheet / Hopper whitepaper, PCIe"),
    "H200": _hopper("H200", 4.8, 34, 67, 67, 133.8, 494.7, 989.4, 1978.9, "H200 datasheet (SXM)"),
    "A100 80GB": DeviceSpec(
        "A100 80GB", 2.039 * T,
        {"fp64": 9.7 * T, "tensor_fp64": 19.5 * T, "fp32": 19.5 * T, "fp16": 78 * T, "tensor_tf32": 156 * T,
         "tensor_bf16": 312 * T, "tensor_fp16": 312 * T, "tensor_int8": 624 * T},
        "A100 datasheet / Ampere whitepaper, SXM4 80GB",
        {"tensor_tf32": 312 * T, "tensor_bf16": 624 * T, "tensor_fp16": 624 * T, "tensor_int8": 1248 * T}),
    "B200": DeviceSpec(
        "B200", 7.7 * T,
        {"fp64": 37 * T, "tensor_fp64": 37 * T, "fp32": 75 * T, "tensor_tf32": 1100 * T, "tensor_bf16": 2250 * T,
         "tensor_fp16": 2250 * T, "tensor_fp8": 4500 * T, "tensor_int8": 4500 * T},
        "NVIDIA Blackwell datasheet, HGX B200 per GPU (sparse figures halved)",
        {"tensor_tf32": 2200 * T, "tensor_bf16": 4500 * T, "tensor_fp16": 4500 * T, "tensor_fp8": 9000 * T,
         "tensor_int8": 9000 * T}),
}
REFERENCE_DEVICE = "H100 SXM"  # the user asked for plots against an H100 roofline: drawn on every chart
DEFAULT_DEVICE = REFERENCE_DEVICE  # roof for rows whose capture device is not in the table

# capture-name fragments, most specific first ('NVIDIA H100 PCIe' must not match 'H100')
_NAME_KEYS = (("H200", "H200"), ("H100 PCIE", "H100 PCIe"), ("H100", "H100 SXM"), ("A100", "A100 80GB"),
              ("B200", "B200"))


def spec_for_device_name(device_name: str | None) -> DeviceSpec | None:
    """The datasheet entry for a captured device name ('NVIDIA H200' -> H200), if known."""
    if not device_name:
        return None
    text = device_name.upper()
    for fragment, key in _NAME_KEYS:
        if fragment in text:
            return DEVICES[key]
    return None
