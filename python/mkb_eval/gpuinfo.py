"""Facts about the machine for reports: GPU clocks (NVML through pynvml, else nvidia-smi) and the
versions of Python, torch and CUDA. Judge-side only (trusted code)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Any


def clocks(index: int = 0) -> dict[str, Any]:
    """SM and memory clocks in MHz now (plus max SM clock, temperature, power where known)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
            out: dict[str, Any] = {
                "source": "nvml",
                "sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
                "sm_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            }
            try:
                out["temp_c"] = pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)
                out["power_w"] = pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0
            except Exception:  # noqa: BLE001 - optional facts
                pass
            return out
        finally:
            pynvml.nvmlShutdown()
    except Exception as e:  # noqa: BLE001 - fall back to nvidia-smi
        nvml_error = str(e)
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            r = subprocess.run([smi, f"--id={index}", "--query-gpu=clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw",
                                "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20)
            vals = [v.strip() for v in r.stdout.strip().split(",")]
            if r.returncode == 0 and len(vals) >= 3:
                def num(v: str) -> float | None:
                    try:
                        return float(v)
                    except ValueError:
                        return None
                return {"source": "nvidia-smi", "sm_mhz": num(vals[0]), "mem_mhz": num(vals[1]),
                        "sm_max_mhz": num(vals[2]), "temp_c": num(vals[3]) if len(vals) > 3 else None,
                        "power_w": num(vals[4]) if len(vals) > 4 else None}
        except (OSError, subprocess.SubprocessError):
            pass
    return {"source": None, "error": f"no NVML ({nvml_error}) and no usable nvidia-smi"}


def versions() -> dict[str, Any]:
    import torch

    return {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda}


def driver_version(index: int = 0) -> str | None:
    """The NVIDIA driver version (NVML, else nvidia-smi); None without a driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - fall back to nvidia-smi
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            r = subprocess.run([smi, f"--id={index}", "--query-gpu=driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=20)
            if r.returncode == 0 and r.stdout.strip():
                return r.stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError):
            pass
    return None
