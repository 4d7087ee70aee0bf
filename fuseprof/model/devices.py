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
- NVIDIA B300 (Blackwell Ultra, HGX B300 per GPU): the HGX B300 data sheet's 8-GPU column divided by 8
  (https://www.nvidia.com/en-us/data-center/hgx/; as tabulated at glennklockwood.com/garden/processors/B300):
  8 TB/s HBM3e, FP64/FP64 tensor 1.25, FP32 75; TF32 1,125, FP16/BF16 2,250, FP8 4,500 (sparse halved). Its
  INT8 row is cut on Blackwell Ultra and printed inconsistently: left out.
- NVIDIA GB300 (one GPU of a GB300 NVL72): the GB300 NVL72 data sheet divided by its 72 GPUs: 8 TB/s (576 TB/s);
  TF32 1.25, FP16/BF16 2.5, FP8 5 P (dense: sparse halved). No FP32 or FP64 row taken.
- NVIDIA H800 SXM: its specifications (the H100 SXM5's with FP64 cut): 3.35 TB/s HBM3; FP64 and FP64 tensor 1,
  FP32 67; TF32 494.7, FP16/BF16 989.4, FP8 and INT8 1,978.9 (dense: the sparse 989/1,979/3,958 halved).
- NVIDIA GeForce RTX 4090: "NVIDIA Ada GPU Architecture" whitepaper, Appendix A: 1,008 GB/s GDDR6X; FP32 82.6;
  dense tensor with FP32 accumulate (what PyTorch's matmuls use): TF32 82.6, FP16/BF16 165.2, FP8 330.3; INT8 660.6.
- NVIDIA RTX 6000 Ada Generation: its data sheet: 960 GB/s GDDR6; FP32 91.1; "Tensor performance 1,457 TFLOPS"
  (FP8 with sparsity): FP8 728.5 dense. No other tensor row printed: left out.
- NVIDIA GeForce RTX 3090: "NVIDIA Ampere GA102 GPU Architecture" whitepaper, Table 2 (RTX 3090 column): 936 GB/s
  GDDR6X; FP32 35.6; dense tensor with FP32 accumulate: TF32 35.6, FP16/BF16 71; INT8 284.
- NVIDIA RTX A6000: its data sheet: 768 GB/s GDDR6; FP32 38.7; "Tensor performance 309.7 TFLOPS" (FP16 with
  sparsity): FP16/BF16 154.8 dense.
- NVIDIA GeForce RTX 2080 Ti: "NVIDIA Turing GPU Architecture" whitepaper, Table 1 (reference board, not the
  Founders Edition's overclock): 616 GB/s GDDR6; FP32 13.4, FP16 26.9; FP16 tensor with FP32 accumulate 53.8;
  INT8 215.2. No BF16 (its BF16 work runs on the FP32 pipe).
- NVIDIA Quadro GP100: its data sheet: 717 GB/s HBM2; FP64 5.2, FP32 10.3, FP16 20.7. No tensor cores.

What each row is, for matching a device by its properties (``identify``): vendor, compute capability (ROCm's gfx
arch as major.minor on AMD), SMs (CUs) and nominal memory, from the same data sheets and the CUDA C Programming
Guide's compute-capability table; checked against every ``deviceProperties`` of the committed and shared traces.

Pipes are keyed as in ``PIPES``: ``tensor_<precision>`` for the tensor cores by source
precision (the ``flops_tensor_*`` columns), ``fp16``/``fp32``/``fp64`` for the SIMT pipes (the
``flops_fp*`` columns; fp16 covers packed bf16 too, which runs at the same rate on these parts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

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
    vendor: str = "nvidia"  # "nvidia" or "amd"
    arch: tuple[int, int] | None = None  # compute capability; gfx arch (9.4 = gfx942) on AMD
    units: int | None = None  # SMs (CUs on AMD) as deviceProperties' numSms counts them; None: not printed
    memory_gb: float | None = None  # nominal memory, GB

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
DEVICES.update({
    "H800": _hopper("H800", 3.35, 1, 1, 67, 133.8, 494.7, 989.4, 1978.9, "NVIDIA H800 SXM specifications"),
    "B300": _spec("B300", 8.0, "NVIDIA HGX B300 data sheet, per GPU (sparse halved)", fp64=1.25, tensor_fp64=1.25,
                  fp32=75, tensor_tf32=1125, tensor_bf16=2250, tensor_fp8=4500),
    "GB300": _spec("GB300", 8.0, "NVIDIA GB300 NVL72 data sheet, per GPU (sparse halved)", tensor_tf32=1250,
                   tensor_bf16=2500, tensor_fp8=5000),
    "RTX 4090": _spec("RTX 4090", 1.008, "NVIDIA Ada architecture whitepaper, RTX 4090 (FP32 accumulate)",
                      fp32=82.6, tensor_tf32=82.6, tensor_bf16=165.2, tensor_fp8=330.3, tensor_int8=660.6),
    "RTX 6000 Ada": _spec("RTX 6000 Ada", 0.96, "NVIDIA RTX 6000 Ada data sheet (FP8 sparse halved)", fp32=91.1,
                          tensor_fp8=728.5),
    "RTX 3090": _spec("RTX 3090", 0.936, "NVIDIA Ampere GA102 whitepaper, RTX 3090 (FP32 accumulate)", fp32=35.6,
                      tensor_tf32=35.6, tensor_bf16=71, tensor_int8=284),
    "RTX A6000": _spec("RTX A6000", 0.768, "NVIDIA RTX A6000 data sheet (FP16 sparse halved)", fp32=38.7,
                       tensor_bf16=154.8),
    "RTX 2080 Ti": _spec("RTX 2080 Ti", 0.616, "NVIDIA Turing whitepaper, RTX 2080 Ti reference (FP32 accumulate)",
                         fp32=13.4, fp16=26.9, tensor_fp16=53.8, tensor_int8=215.2),
    "Quadro GP100": _spec("Quadro GP100", 0.717, "NVIDIA Quadro GP100 data sheet", fp64=5.2, fp32=10.3, fp16=20.7),
})
_IDENTITY: dict[str, tuple[str, tuple[int, int], int | None, float]] = {  # key -> (vendor, arch, SMs/CUs, GB)
    "H100 SXM": ("nvidia", (9, 0), 132, 80), "H800": ("nvidia", (9, 0), 132, 80),
    "H100 PCIe": ("nvidia", (9, 0), 114, 80), "H200": ("nvidia", (9, 0), 132, 141), "H20": ("nvidia", (9, 0), 78, 96),
    "A100 40GB": ("nvidia", (8, 0), 108, 40), "A100 80GB": ("nvidia", (8, 0), 108, 80),
    "V100": ("nvidia", (7, 0), 80, 32), "B200": ("nvidia", (10, 0), 148, 180), "GB200": ("nvidia", (10, 0), None, 186),
    "B300": ("nvidia", (10, 3), 148, 288), "GB300": ("nvidia", (10, 3), None, 288),
    "L40S": ("nvidia", (8, 9), 142, 48), "RTX 6000 Ada": ("nvidia", (8, 9), 142, 48), "L4": ("nvidia", (8, 9), 58, 24),
    "RTX 4090": ("nvidia", (8, 9), 128, 24), "A10": ("nvidia", (8, 6), 72, 24), "RTX 3090": ("nvidia", (8, 6), 82, 24),
    "RTX A6000": ("nvidia", (8, 6), 84, 48), "RTX 2080 Ti": ("nvidia", (7, 5), 68, 11),
    "Quadro GP100": ("nvidia", (6, 0), 56, 16),
    # AMD: one GCD of a two-die module is what PyTorch calls a device (MI250X: 110 of the module's 220 CUs)
    "MI300X": ("amd", (9, 4), 304, 192), "MI325X": ("amd", (9, 4), 304, 256), "MI355X": ("amd", (9, 5), 256, 288),
    "MI250X": ("amd", (9, 0), 110, 64), "MI250": ("amd", (9, 0), 104, 64), "MI210": ("amd", (9, 0), 104, 64),
}
DEVICES = {key: replace(spec, vendor=_IDENTITY[key][0], arch=_IDENTITY[key][1], units=_IDENTITY[key][2],
                        memory_gb=_IDENTITY[key][3]) for key, spec in DEVICES.items()}
REFERENCE_DEVICE = "H100 SXM"  # the user asked for plots against an H100 roofline: drawn on every chart


@dataclass(frozen=True)
class SmLimits:
    """Per-SM resources that bound resident blocks (CUDA C Programming Guide, "Technical Specifications per Compute
    Capability", and the CUDA occupancy calculator's allocation units); the formulas are
    ``fuseprof.model.occupancy.occupancy``'s."""

    max_warps: int = 64
    max_blocks: int = 32
    registers: int = 65536
    register_partitions: int = 4  # the register file is split across the SM's schedulers
    register_unit: int = 256  # registers are allocated per warp in units of 256
    max_registers_per_thread: int = 255
    shared_bytes: int = 233472  # 228 KB usable by blocks
    shared_unit: int = 128
    shared_reserved_per_block: int = 1024  # the runtime reserves 1 KB of shared memory per block (8.0 and later)
    warp_width: int = 32


# compute capability -> per-SM limits (the programming guide's table: resident warps, resident blocks, 32-bit
# registers, shared memory per SM; Pascal's GP100 SM has 2 processing blocks, later SMs 4). AMD's CUs are not
# described by this model (VGPR files per SIMD, wave slots): no row, so occupancy there reads "unknown".
SM_LIMITS: dict[tuple[int, int], SmLimits] = {
    (6, 0): SmLimits(max_warps=64, max_blocks=32, register_partitions=2, shared_bytes=65536, shared_unit=256,
                     shared_reserved_per_block=0),
    (7, 0): SmLimits(max_warps=64, max_blocks=32, shared_bytes=98304, shared_unit=256, shared_reserved_per_block=0),
    (7, 5): SmLimits(max_warps=32, max_blocks=16, shared_bytes=65536, shared_unit=256, shared_reserved_per_block=0),
    (8, 0): SmLimits(max_warps=64, max_blocks=32, shared_bytes=167936),
    (8, 6): SmLimits(max_warps=48, max_blocks=16, shared_bytes=102400),
    (8, 9): SmLimits(max_warps=48, max_blocks=24, shared_bytes=102400),
    (9, 0): SmLimits(),
    (10, 0): SmLimits(),
    (10, 3): SmLimits(),
}

# capture-name patterns, most specific first ('NVIDIA H100 PCIe' must not match 'H100', 'GB200' not 'B200',
# 'H20' not 'H200', 'A100' not 'A10', 'L40S' not 'L4', 'RTX A6000' not 'RTX 6000 Ada'); searched in the
# upper-cased name. A family's name without its size ('A100-PG509-200') is the first row; its properties pick
# the part (``identify``).
_NAME_KEYS = tuple((re.compile(pattern), key) for pattern, key in (
    (r"H200", "H200"), (r"H100 PCIE", "H100 PCIe"), (r"H100", "H100 SXM"), (r"H800", "H800"),
    (r"A100\b.*\b40\s?GB", "A100 40GB"), (r"A100", "A100 80GB"), (r"V100", "V100"), (r"MI210", "MI210"),
    (r"GB300", "GB300"), (r"B300", "B300"), (r"GB200", "GB200"), (r"B200", "B200"), (r"\bH20\b", "H20"),
    (r"L40S", "L40S"), (r"\bA10G?\b", "A10"), (r"\bL4\b", "L4"), (r"RTX 6000 ADA", "RTX 6000 Ada"),
    (r"\bA6000\b", "RTX A6000"), (r"\b4090\b", "RTX 4090"), (r"\b3090\b", "RTX 3090"), (r"\b2080 ?TI\b", "RTX 2080 Ti"),
    (r"GP100", "Quadro GP100"), (r"MI300X", "MI300X"), (r"MI325X", "MI325X"), (r"MI355X", "MI355X"),
    (r"MI250X", "MI250X"), (r"MI250", "MI250")))  # ROCm names an MI250X's GCD 'AMD Instinct MI250X/MI250'
_AMD_NAME = re.compile(r"\bAMD\b|INSTINCT|RADEON")
_NVIDIA_NAME = re.compile(r"NVIDIA|TESLA|QUADRO|GEFORCE|\bRTX\b")


def _vendors(name: str | None, properties: Mapping[str, int]) -> tuple[str | None, str | None]:
    """The vendor the name says and the one the warp size says (64 wide on CDNA, 32 on NVIDIA). ROCm writes its
    gfx arch into computeMajor/Minor, so an arch of 9.x alone says nothing."""
    text = (name or "").upper()
    said = "amd" if _AMD_NAME.search(text) else "nvidia" if _NVIDIA_NAME.search(text) else None
    return said, {64: "amd", 32: "nvidia"}.get(properties.get("warp", 0))


def vendor_of(name: str | None, properties: Mapping[str, int]) -> str | None:
    """'amd' or 'nvidia' where the name and the warp size agree (or one of them says); None where neither says
    or they contradict each other."""
    said, warp = _vendors(name, properties)
    return said or warp if said is None or warp is None or said == warp else None


def _by_name(name: str | None, vendor: str | None) -> str | None:
    if not name:
        return None
    if name in DEVICES:
        return name
    text = name.upper()
    return next((key for pattern, key in _NAME_KEYS if pattern.search(text)
                 and vendor in (None, DEVICES[key].vendor)), None)


def _by_properties(properties: Mapping[str, int], vendor: str | None) -> list[str]:
    """The rows of the device's vendor, arch and SM (CU) count, those nearest its memory first (a virtual
    function or a driver's reserve shows a little less than the nominal size); [] where any is missing."""
    arch, units = (properties.get("major"), properties.get("minor")), properties.get("sms")
    if None in arch or units is None:
        return []
    rows = [k for k, s in DEVICES.items() if s.arch == arch and s.units == units and vendor in (None, s.vendor)]
    memory_gb = properties.get("memory_bytes", 0) / 1e9
    nearest = min((abs((DEVICES[k].memory_gb or 0) - memory_gb) for k in rows), default=0.0)
    return [k for k in rows if abs((DEVICES[k].memory_gb or 0) - memory_gb) == nearest]


@dataclass(frozen=True)
class Identified:
    """Which row of the table a captured device is (``key``, None where no row is), and how that was decided."""

    key: str | None
    why: str

    @property
    def spec(self) -> DeviceSpec | None:
        return DEVICES[self.key] if self.key else None


def _described(properties: Mapping[str, int]) -> str:
    p = properties
    return (f"{p.get('sms')} SMs/CUs, {p.get('memory_bytes', 0) / 1e9:.1f} GB, arch {p.get('major')}.{p.get('minor')}, "
            f"warp {p.get('warp')}")


def identify(name: str | None, properties: Mapping[str, int] | None = None) -> Identified:
    """The table's row for a device ``deviceProperties`` describes: its vendor first (name, else warp size), then
    its properties (arch, SMs/CUs, memory: an A100-PG509-200 with 42 GB is the 40 GB part), then its name among
    rows the properties leave alike (an H800 and an H100 SXM share them). A name decides alone only where the
    properties give no SM count or the row prints none (GB200); a named part whose SM count is not its row's (a MIG
    slice, an MI300X in CPX mode) and a device no row matches are an unknown GPU (key None)."""
    properties = properties or {}
    said, warp = _vendors(name, properties)
    if said and warp and said != warp:
        return Identified(None, f"unknown GPU {name!r}: its name says {said}, its warp size "
                                f"({properties.get('warp')}) {warp}; pass --device NAME")
    vendor = said or warp
    named, alike = _by_name(name, vendor), _by_properties(properties, vendor)
    if alike:
        if named in alike:
            return Identified(named, f"{named}: its name and properties ({_described(properties)})")
        others = f"; alike by properties: {', '.join(alike[1:])}" if len(alike) > 1 else ""
        said = f" (its name {name!r} reads {named})" if named else f" ({name!r})" if name else ""
        return Identified(alike[0], f"{alike[0]}: recognised from deviceProperties ({_described(properties)})"
                                    f"{said}{others}")
    if named and DEVICES[named].units is not None and properties.get("sms") not in (None, DEVICES[named].units):
        return Identified(None, f"unknown GPU {name!r}: its properties ({_described(properties)}) are not the "
                                f"{named}'s ({DEVICES[named].units} SMs/CUs): a partition (MIG, CPX) or another "
                                "part; pass --device NAME")
    if named:
        return Identified(named, f"{named}: by its name {name!r}")
    what = repr(name) if name else f"({_described(properties)})" if properties else "(the trace names no device)"
    return Identified(None, f"unknown GPU {what}: pass --device NAME")


def device_from_properties(properties: Mapping[str, int]) -> str | None:
    """The table's key for a device ``deviceProperties`` describes without a name (``identify`` with no name)."""
    return identify(None, properties).key if properties.get("sms") is not None else None


def spec_for_device_name(device_name: str | None) -> DeviceSpec | None:
    """The datasheet entry for a captured device name ('NVIDIA H200' -> H200, 'AMD Instinct MI300X VF'
    -> MI300X) or a table key, if known (a name alone: ``identify`` weighs the properties too)."""
    return identify(device_name).spec


def limits_for(key: str | None, properties: Mapping[str, int] | None = None) -> SmLimits | None:
    """The per-SM limits occupancy needs for a device: its compute capability's (the row's, else the one
    ``deviceProperties`` gives on NVIDIA), with the trace's own registers, shared memory and resident threads per
    SM over them where it records them; None where unknown (an AMD CU, no arch)."""
    properties = properties or {}
    spec = DEVICES.get(key) if key else None
    arch = spec.arch if spec else (properties.get("major"), properties.get("minor"))
    vendor = spec.vendor if spec else vendor_of(None, properties)
    base = SM_LIMITS.get(arch) if vendor == "nvidia" and arch is not None else None  # type: ignore[arg-type]
    if base is None:
        return None
    given = {"registers": properties.get("registers"), "shared_bytes": properties.get("shared_bytes"),
             "max_warps": properties["max_threads"] // base.warp_width if properties.get("max_threads") else None}
    return replace(base, **{k: v for k, v in given.items() if v})


def require_device(device_name: str) -> DeviceSpec:
    """A device a user named (``--device``): known, or an error that lists the known names."""
    from fuseprof.errors import InvalidArgumentError

    spec = spec_for_device_name(device_name)
    if spec is None:
        raise InvalidArgumentError(f"--device {device_name!r}: unknown GPU; known: {', '.join(DEVICES)} "
                                   "(or a name that contains one, e.g. 'NVIDIA H200', 'AMD Instinct MI300X')")
    return spec
