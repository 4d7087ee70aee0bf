"""Datasheet ceilings of the GPUs fuseprof draws rooflines for.

Dense rates (no structured sparsity), in base units (bytes/s, FLOP/s), each from NVIDIA's
published figures:
- H100 SXM5 and H100 PCIe: "NVIDIA H100 Tensor Core GPU" datasheet and the Hopper architecture
  whitepaper (table "NVIDIA H100 SXM5 and PCIe specifications"; FP16/BF16 non-tensor rows).
- H200 SXM: "NVIDIA H200 Tensor Core GPU" datasheet (4.8 TB/s HBM3e, 141 GB); its arithmetic is
  the H100 SXM5's (same GH100 die and clocks), which the datasheet's FP64/FP32/tensor rows repeat.
- A100 80GB SXM: "NVIDIA A100 Tensor Core GPU" datasheet (2,039 GB/s) and the Ampere
  architecture whitepaper (FP16 non-tensor 78 TFLOPS, BF16 non-tensor 39 TFLOPS).
"""

from __future__ import annotations

from dataclasses import dataclass

T = 1e12


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    dram_bytes_per_s: float
    fp64_flops_per_s: float
    fp32_flops_per_s: float
    fp16_flops_per_s: float  # vector (non-tensor) half precision
    bf16_flops_per_s: float  # vector (non-tensor)
    fp64_tensor_flops_per_s: float
    fp16_tensor_flops_per_s: float  # also BF16 on these parts
    source: str

    def compute_roofs(self) -> dict[str, float]:
        return {"FP64": self.fp64_flops_per_s, "FP32": self.fp32_flops_per_s, "FP16": self.fp16_flops_per_s,
                "BF16": self.bf16_flops_per_s, "FP64 tensor": self.fp64_tensor_flops_per_s,
                "FP16/BF16 tensor": self.fp16_tensor_flops_per_s}


DEVICES: dict[str, DeviceSpec] = {
    "H100 SXM": DeviceSpec("H100 SXM", 3.35 * T, 34 * T, 67 * T, 133.8 * T, 133.8 * T, 67 * T, 989.4 * T,
                           "H100 datasheet / Hopper whitepaper, SXM5"),
    "H100 PCIe": DeviceSpec("H100 PCIe", 2.0 * T, 25.6 * T, 51.2 * T, 102.4 * T, 102.4 * T, 51.2 * T, 756.5 * T,
                            "H100 datasheet / Hopper whitepaper, PCIe"),
    "H200": DeviceSpec("H200", 4.8 * T, 34 * T, 67 * T, 133.8 * T, 133.8 * T, 67 * T, 989.4 * T,
                       "H200 datasheet (SXM)"),
    "A100 80GB": DeviceSpec("A100 80GB", 2.039 * T, 9.7 * T, 19.5 * T, 78 * T, 39 * T, 19.5 * T, 312 * T,
                            "A100 datasheet / Ampere whitepaper, SXM4 80GB"),
}
DEFAULT_DEVICE = "H100 SXM"


def spec_for_device_name(device_name: str | None) -> DeviceSpec | None:
    """The datasheet entry for a captured device name ('NVIDIA H200' -> H200), if known."""
    if not device_name:
        return None
    text = device_name.upper()
    for key in ("H200", "H100 PCIE", "H100", "A100"):
        if key in text:
            return DEVICES[{"H200": "H200", "H100 PCIE": "H100 PCIe", "H100": "H100 SXM", "A100": "A100 80GB"}[key]]
    return None
