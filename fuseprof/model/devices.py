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

- AMD Instinct MI300X: "AMD Instinct MI300X Accelerator" data sheet (5.3 TB/s HBM3; FP64 vector 81.7,
  FP64/FP32 matrix and FP32 vector 163.4, TF32 653.7, FP16/BF16 1,307.4, FP8 and INT8 2,614.9, dense).
- AMD Instinct MI325X: its data sheet: the MI300X's compute with 6 TB/s HBM3E.
- AMD Instinct MI355X: its data sheet: 8 TB/s HBM3E; FP64 vector and matrix 78.6, FP32 157.3, FP16/BF16
  2.5 PFLOPS, FP8 and INT8 5.0 P, dense (no TF32 row).
- AMD Instinct MI250X, MI250: one GCD — what PyTorch calls a device and a kernel runs on — of the module the
  data sheet describes, so half its figures: MI250X 1.6 TB/s HBM2e, FP64 and FP32 vector 23.95, FP64/FP32 matrix
  47.85, FP16/BF16 and INT8 191.5; MI250 1.6 TB/s, vector 22.65, matrix 45.25, FP16/BF16 and INT8 181.0.
- AMD Instinct MI210: its data sheet: 1.6 TB/s HBM2e; FP64 and FP32 vector 22.6, FP64/FP32 matrix 45.3,
  FP16/BF16 and INT8 181.0 (one GCD: the MI250's per-GCD rates).
- NVIDIA V100 SXM2: its data sheet: 900 GB/s HBM2; FP64 7.8, FP32 15.7, tensor (FP16 in) 125; no BF16 (its
  BF16 work runs on the FP32 pipe).
- NVIDIA A100 40GB SXM: the A100 datasheet's 40GB column: 1,555 GB/s; the 80GB part's arithmetic.
- NVIDIA L40S: its data sheet: 864 GB/s GDDR6; FP32 91.6; TF32 183, FP16/BF16 362, FP8 and INT8 733 (dense:
  the sparse figures halved). No FP64 row.
- NVIDIA A10 (AWS's A10G is a variant of it; matched by name): A10 data sheet: 600 GB/s; FP32 31.2; TF32
  62.5, FP16/BF16 125, INT8 250 (dense).
- NVIDIA L4: its data sheet: 300 GB/s; FP32 30.3; TF32 60, FP16/BF16 121, FP8 and INT8 242.5 (dense).
- NVIDIA H20: its published specifications: 4.0 TB/s HBM3; FP64 1, FP32 44; TF32 74, FP16/BF16 148, FP8 and
  INT8 296 (dense).
- NVIDIA GB200 (one Blackwell GPU of a GB200 NVL72): the NVL72 data sheet divided by its 72 GPUs: 8 TB/s;
  FP64 45; TF32 1.25, FP16/BF16 2.5, FP8 and INT8 5 P (sparse figures halved). No FP32 row.

Pipes are keyed as in ``PIPES``: ``tensor_<precision>`` for the tensor cores by source
precision (the ``flops_tensor_*`` columns), ``fp16``/``fp32``/``fp64`` for the SIMT pipes (the
``flops_fp*`` columns; fp16 covers packed bf16 too, which runs at the same rate on these parts).
"""

from __future__ import annotations

import re
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


def _a100(name: str, dram: float, source: str) -> DeviceSpec:
    """An A100: the 40GB and 80GB parts share the GA100's arithmetic and differ in memory bandwidth."""
    dense = {"fp64": 9.7 * T, "tensor_fp64": 19.5 * T, "fp32": 19.5 * T, "fp16": 78 * T, "tensor_tf32": 156 * T,
             "tensor_bf16": 312 * T, "tensor_fp16": 312 * T, "tensor_int8": 624 * T}
    sparse = {k: 2 * v for k, v in dense.items() if k in ("tensor_tf32", "tensor_bf16", "tensor_fp16", "tensor_int8")}
    return DeviceSpec(name, dram * T, dense, source, sparse)


DEVICES: dict[str, DeviceSpec] = {
    "H100 SXM": _hopper("H100 SXM", 3.35, 34, 67, 67, 133.8, 494.7, 989.4, 1978.9,
                        "H100 datasheet / Hopper whitepaper, SXM5"),
    "H100 PCIe": _hopper("H100 PCIe", 2.0, 25.6, 51.2, 51.2, 102.4, 378, 756.5, 1513,
                         "H100 datasheet / Hopper whitepaper, PCIe"),
    "H200": _hopper("H200", 4.8, 34, 67, 67, 133.8, 494.7, 989.4, 1978.9, "H200 datasheet (SXM)"),
    "A100 80GB": _a100("A100 80GB", 2.039, "A100 datasheet / Ampere whitepaper, SXM4 80GB"),
    "A100 40GB": _a100("A100 40GB", 1.555, "A100 datasheet / Ampere whitepaper, SXM4 40GB"),
    "V100": DeviceSpec(
        "V100", 0.9 * T, {"fp64": 7.8 * T, "fp32": 15.7 * T, "fp16": 31.4 * T, "tensor_fp16": 125 * T},
        "NVIDIA V100 data sheet, SXM2"),
    "B200": DeviceSpec(
        "B200", 7.7 * T,
        {"fp64": 37 * T, "tensor_fp64": 37 * T, "fp32": 75 * T, "tensor_tf32": 1100 * T, "tensor_bf16": 2250 * T,
         "tensor_fp16": 2250 * T, "tensor_fp8": 4500 * T, "tensor_int8": 4500 * T},
        "NVIDIA Blackwell datasheet, HGX B200 per GPU (sparse figures halved)",
        {"tensor_tf32": 2200 * T, "tensor_bf16": 4500 * T, "tensor_fp16": 4500 * T, "tensor_fp8": 9000 * T,
         "tensor_int8": 9000 * T}),
}


def _spec(name: str, dram_tb_per_s: float, source: str, **tflops: float) -> DeviceSpec:
    """A datasheet entry from dense TFLOP/s per pipe (``tensor_bf16=1307.4``); FP16 tensor = BF16 tensor
    where the sheet prints one row for both."""
    dense = {pipe: value * T for pipe, value in tflops.items()}
    if "tensor_bf16" in dense:
        dense.setdefault("tensor_fp16", dense["tensor_bf16"])
    return DeviceSpec(name, dram_tb_per_s * T, dense, source)


_CDNA3 = {"fp64": 81.7, "tensor_fp64": 163.4, "fp32": 163.4, "tensor_tf32": 653.7, "tensor_bf16": 1307.4,
          "tensor_fp8": 2614.9, "tensor_int8": 2614.9}
DEVICES.update({
    "MI300X": _spec("MI300X", 5.3, "AMD Instinct MI300X data sheet", **_CDNA3),
    "MI325X": _spec("MI325X", 6.0, "AMD Instinct MI325X data sheet", **_CDNA3),
    "MI355X": _spec("MI355X", 8.0, "AMD Instinct MI355X data sheet", fp64=78.6, tensor_fp64=78.6, fp32=157.3,
                    tensor_bf16=2500, tensor_fp8=5000, tensor_int8=5000),
    "MI250X": _spec("MI250X", 1.6, "AMD Instinct MI250X data sheet, one GCD (half the module)", fp64=23.95,
                    tensor_fp64=47.85, fp32=23.95, tensor_bf16=191.5, tensor_int8=191.5),
    "MI250": _spec("MI250", 1.6, "AMD Instinct MI250 data sheet, one GCD (half the module)", fp64=22.65,
                   tensor_fp64=45.25, fp32=22.65, tensor_bf16=181.0, tensor_int8=181.0),
    "MI210": _spec("MI210", 1.6, "AMD Instinct MI210 data sheet", fp64=22.6, tensor_fp64=45.3, fp32=22.6,
                   tensor_bf16=181.0, tensor_int8=181.0),
    "L40S": _spec("L40S", 0.864, "NVIDIA L40S data sheet (sparse halved)", fp32=91.6, tensor_tf32=183,
                  tensor_bf16=362, tensor_fp8=733, tensor_int8=733),
    "A10": _spec("A10", 0.6, "NVIDIA A10 data sheet (A10G: AWS's variant)", fp32=31.2, tensor_tf32=62.5,
                 tensor_bf16=125, tensor_int8=250),
    "L4": _spec("L4", 0.3, "NVIDIA L4 data sheet (sparse halved)", fp32=30.3, tensor_tf32=60, tensor_bf16=121,
                tensor_fp8=242.5, tensor_int8=242.5),
    "H20": _spec("H20", 4.0, "NVIDIA H20 specifications", fp64=1, fp32=44, tensor_tf32=74, tensor_bf16=148,
                 tensor_fp8=296, tensor_int8=296),
    "GB200": _spec("GB200", 8.0, "NVIDIA GB200 NVL72 data sheet, per GPU (sparse halved)", fp64=45,
                   tensor_fp64=45, tensor_tf32=1250, tensor_bf16=2500, tensor_fp8=5000, tensor_int8=5000),
})
REFERENCE_DEVICE = "H100 SXM"  # the user asked for plots against an H100 roofline: drawn on every chart
DEFAULT_DEVICE = REFERENCE_DEVICE  # roof for rows whose capture device is not in the table

# capture-name patterns, most specific first ('NVIDIA H100 PCIe' must not match 'H100', 'GB200' not 'B200',
# 'H20' not 'H200', 'A100' not 'A10', 'L40S' not 'L4'); searched in the upper-cased name
_NAME_KEYS = tuple((re.compile(pattern), key) for pattern, key in (
    (r"H200", "H200"), (r"H100 PCIE", "H100 PCIe"), (r"H100", "H100 SXM"), (r"A100\b.*\b40\s?GB", "A100 40GB"),
    (r"A100", "A100 80GB"), (r"V100", "V100"), (r"MI210", "MI210"),
    (r"GB200", "GB200"), (r"B200", "B200"), (r"\bH20\b", "H20"), (r"L40S", "L40S"), (r"\bA10G?\b", "A10"),
    (r"\bL4\b", "L4"), (r"MI300X", "MI300X"), (r"MI325X", "MI325X"), (r"MI355X", "MI355X"),
    (r"MI250X", "MI250X"), (r"MI250", "MI250")))  # ROCm names an MI250X's GCD 'AMD Instinct MI250X/MI250'


# What a device is where deviceProperties leaves its name out: (warp size, compute major.minor — ROCm's gfx
# arch as major.minor —, SMs or CUs, nominal memory in GB) -> the table's key; among rows of one arch and SM
# count, the nearest memory (a virtual function or a driver's reserve shows a little less). Where a part's
# count is ambiguous the rows say so: an MI210 and one GCD of an MI250 are alike (104 CUs, 64 GB, the same
# rates).
_BY_PROPERTIES: tuple[tuple[int, tuple[int, int], int, float, str], ...] = (
    (32, (7, 0), 80, 32, "V100"), (32, (8, 0), 108, 40, "A100 40GB"), (32, (8, 0), 108, 80, "A100 80GB"),
    (32, (8, 6), 72, 24, "A10"), (32, (8, 9), 142, 48, "L40S"), (32, (8, 9), 58, 24, "L4"),
    (32, (9, 0), 132, 80, "H100 SXM"), (32, (9, 0), 114, 80, "H100 PCIe"), (32, (9, 0), 132, 141, "H200"),
    (32, (9, 0), 78, 96, "H20"), (32, (10, 0), 148, 180, "B200"),
    (64, (9, 4), 304, 192, "MI300X"), (64, (9, 4), 304, 256, "MI325X"), (64, (9, 5), 256, 288, "MI355X"),
    (64, (9, 0), 110, 64, "MI250X"), (64, (9, 0), 104, 64, "MI210"),
)


def device_from_properties(properties: dict[str, int]) -> str | None:
    """The table's key for a device ``deviceProperties`` describes without a name (``sms``, ``memory_bytes``,
    ``major``, ``minor``, ``warp``), or None where no row has its warp size, arch and SM count (a partitioned
    GPU: an MI300X in CPX mode shows 38 CUs)."""
    arch = (properties.get("major"), properties.get("minor"))
    rows = [r for r in _BY_PROPERTIES if r[0] == properties.get("warp", r[0]) and r[1] == arch
            and r[2] == properties.get("sms")]
    memory_gb = properties.get("memory_bytes", 0) / 1e9
    return min(rows, key=lambda r: abs(r[3] - memory_gb))[4] if rows else None


def spec_for_device_name(device_name: str | None) -> DeviceSpec | None:
    """The datasheet entry for a captured device name ('NVIDIA H200' -> H200, 'AMD Instinct MI300X VF'
    -> MI300X) or a table key, if known."""
    if not device_name:
        return None
    if device_name in DEVICES:
        return DEVICES[device_name]
    text = device_name.upper()
    for pattern, key in _NAME_KEYS:
        if pattern.search(text):
            return DEVICES[key]
    return None


def require_device(device_name: str) -> DeviceSpec:
    """A device a user named (``--device``): known, or an error that lists the known names."""
    from fuseprof.errors import InvalidArgumentError

    spec = spec_for_device_name(device_name)
    if spec is None:
        raise InvalidArgumentError(f"--device {device_name!r}: unknown GPU; known: {', '.join(DEVICES)} "
                                   "(or a name that contains one, e.g. 'NVIDIA H200', 'AMD Instinct MI300X')")
    return spec
