"""Facts about the capture device from NVML (nvidia-ml-py) and torch, for the manifest."""

from __future__ import annotations

from typing import Any

import torch


def _nvml_facts(props: Any, index: int) -> dict[str, Any]:
    import pynvml as nvml  # provided by nvidia-ml-py

    nvml.nvmlInit()
    try:
        # Match by PCI address: NVML's index ignores CUDA_VISIBLE_DEVICES, torch's does not.
        if hasattr(props, "pci_bus_id"):
            bus_id = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
            handle = nvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        else:
            bus_id, handle = None, nvml.nvmlDeviceGetHandleByIndex(index)
        clock = nvml.nvmlDeviceGetClockInfo
        max_clock = nvml.nvmlDeviceGetMaxClockInfo
        return {
            "nvml_name": nvml.nvmlDeviceGetName(handle),
            "driver": nvml.nvmlSystemGetDriverVersion(),
            "pci_bus_id": bus_id,
            "memory_bus_width_bits": nvml.nvmlDeviceGetMemoryBusWidth(handle),
            "memory_total_bytes": nvml.nvmlDeviceGetMemoryInfo(handle).total,
            "sm_clock_max_mhz": max_clock(handle, nvml.NVML_CLOCK_SM),
            "memory_clock_max_mhz": max_clock(handle, nvml.NVML_CLOCK_MEM),
            "sm_clock_at_start_mhz": clock(handle, nvml.NVML_CLOCK_SM),
            "memory_clock_at_start_mhz": clock(handle, nvml.NVML_CLOCK_MEM),
            "temperature_c": nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            "power_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
        }
    finally:
        nvml.nvmlShutdown()


def device_facts(device: torch.device) -> dict[str, Any]:
    """Name, SMs, caches and clocks; NVML failures are recorded, not raised."""
    if device.type != "cuda":
        return {"name": "cpu", "type": "cpu"}
    props = torch.cuda.get_device_properties(device)
    facts: dict[str, Any] = {
        "name": props.name,
        "type": "cuda",
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "l2_cache_bytes": getattr(props, "L2_cache_size", None),
        "total_memory_bytes": props.total_memory,
    }
    try:
        facts.update(_nvml_facts(props, device.index or 0))
    except Exception as exc:  # NVML missing or refused: keep the capture, say why
        facts["nvml_error"] = f"{type(exc).__name__}: {exc}"
    return facts
