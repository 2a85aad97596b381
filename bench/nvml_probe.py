"""One short run on a GPU machine: what NvmlSource reads, and raw NVML facts to check it by.

Prints, per GPU, every GpuSample field, the problems and the driver version; the time of one
poll (median over --polls); then raw facts that validate the adapter's assumptions: v1 vs v2
memory (used/reserved), whether nvmlDeviceGetSamples works, how deep the driver's sample
buffer is and how many samples one second yields, clock event reason bits (decoded), power,
temperature both ways, the raw process list, MIG mode, and the cost of each NVML call.

    .venv/bin/python bench/nvml_probe.py                       # the real driver
    .venv/bin/python bench/nvml_probe.py --fake deadlock:train_s=2
    .venv/bin/python bench/nvml_probe.py --json "$OUT/probe.json"

Exits 0 with a plain message when there is no NVML.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

from governor.adapters.telemetry.nvml import NvmlSource
from governor.domain.ports import SystemClock
from governor.fakes.nvml import FakeNvml, describe_scenarios

REASON_BITS = {
    0x1: "GpuIdle",
    0x2: "ApplicationsClocksSetting",
    0x4: "SwPowerCap",
    0x8: "HwSlowdown",
    0x10: "SyncBoost",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
    0x200: "BoardLimit",
    0x400: "Reliability",
}


def attempt(fn: Callable[[], Any]) -> Any:
    """The value, or the error as text: a probe reports failures, it does not stop on them."""
    try:
        return fn()
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"


def reasons(mask: Any) -> Any:
    if not isinstance(mask, int):
        return mask
    names = [name for bit, name in REASON_BITS.items() if mask & bit]
    unknown = mask & ~sum(REASON_BITS)
    return {"mask": hex(mask), "bits": names + ([hex(unknown)] if unknown else [])}


def median_us(fn: Callable[[], Any], repeat: int) -> float | str:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            fn()
        except Exception as exc:
            return f"error: {type(exc).__name__}"
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1e6, 1)


def adapter_view(polls: int) -> dict[str, Any]:
    source = NvmlSource(SystemClock())
    try:
        reading = source.read()
        view: dict[str, Any] = {
            "available": reading.available,
            "unavailable_reason": reading.unavailable_reason,
            "driver_version": reading.driver_version,
            "gpus": [
                dataclasses.asdict(gpu) | {"free_ratio": gpu.free_ratio} for gpu in reading.gpus
            ],
            "problems": [dataclasses.asdict(problem) for problem in reading.problems],
        }
        if reading.available:
            times = []
            for _ in range(polls):
                start = time.perf_counter()
                source.read()
                times.append(time.perf_counter() - start)
            view["poll_ms_median"] = round(statistics.median(times) * 1e3, 3)
            view["poll_ms_max"] = round(max(times) * 1e3, 3)
        return view
    finally:
        source.close()


def raw_facts(window_s: float) -> dict[str, Any]:
    import pynvml

    pynvml.nvmlInit()
    try:
        facts: dict[str, Any] = {
            "binding": attempt(lambda: metadata.version("nvidia-ml-py")),
            "driver_version": attempt(pynvml.nvmlSystemGetDriverVersion),
            "nvml_version": attempt(pynvml.nvmlSystemGetNVMLVersion),
            "cuda_driver_version": attempt(pynvml.nvmlSystemGetCudaDriverVersion),
            "gpus": [],
        }
        count = pynvml.nvmlDeviceGetCount()
        handles = [attempt(lambda i=i: pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
        last_seen: list[int] = []
        for index, handle in enumerate(handles):
            if isinstance(handle, str):
                facts["gpus"].append({"index": index, "handle": handle})
                last_seen.append(0)
                continue
            gpu = gpu_facts(pynvml, index, handle)
            facts["gpus"].append(gpu)
            buffer = gpu["samples_buffer"]
            last_seen.append(buffer.get("newest_us", 0) if isinstance(buffer, dict) else 0)
        time.sleep(window_s)
        for gpu, handle, since in zip(facts["gpus"], handles, last_seen, strict=True):
            if not isinstance(handle, str):
                gpu[f"samples_in_{window_s:g}s"] = attempt(
                    lambda h=handle, s=since: len(
                        pynvml.nvmlDeviceGetSamples(h, pynvml.NVML_GPU_UTILIZATION_SAMPLES, s)[1]
                    )
                )
        return facts
    finally:
        pynvml.nvmlShutdown()


def gpu_facts(pynvml: Any, index: int, handle: Any) -> dict[str, Any]:
    def memory(version: Any = None) -> dict[str, int]:
        struct = pynvml.nvmlDeviceGetMemoryInfo(handle, version=version)
        return {name: getattr(struct, name) for name, _ in struct._fields_ if name != "version"}

    def processes() -> list[dict[str, Any]]:
        return [p.__dict__ for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]

    def sample_buffer() -> dict[str, Any]:
        kind, samples = pynvml.nvmlDeviceGetSamples(handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
        stamps = sorted(s.timeStamp for s in samples)
        if not stamps:
            return {"value_type": kind, "count": 0}
        gaps = [b - a for a, b in itertools.pairwise(stamps)]
        return {
            "value_type": kind,
            "count": len(stamps),
            "span_s": round((stamps[-1] - stamps[0]) / 1e6, 3),
            "median_period_ms": round(statistics.median(gaps) / 1e3, 1) if gaps else None,
            "newest_us": stamps[-1],
            "values_last_10": [s.sampleValue.uiVal for s in samples[-10:]],
        }

    util = attempt(lambda: pynvml.nvmlDeviceGetUtilizationRates(handle))
    calls: dict[str, Callable[[], Any]] = {
        "nvmlDeviceGetUUID": lambda: pynvml.nvmlDeviceGetUUID(handle),
        "nvmlDeviceGetSamples(last 1 s)": lambda: attempt(
            lambda: pynvml.nvmlDeviceGetSamples(handle, 1, time.time_ns() // 1000 - 1_000_000)
        ),
        "nvmlDeviceGetUtilizationRates": lambda: pynvml.nvmlDeviceGetUtilizationRates(handle),
        "nvmlDeviceGetMemoryInfo_v2": lambda: memory(pynvml.nvmlMemory_v2),
        "nvmlDeviceGetPowerUsage": lambda: pynvml.nvmlDeviceGetPowerUsage(handle),
        "nvmlDeviceGetTemperatureV": lambda: pynvml.nvmlDeviceGetTemperatureV(handle, 0),
        "nvmlDeviceGetComputeRunningProcesses": processes,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda: (
            pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
        ),
    }
    return {
        "index": index,
        "name": attempt(lambda: pynvml.nvmlDeviceGetName(handle)),
        "uuid": attempt(lambda: pynvml.nvmlDeviceGetUUID(handle)),
        "pci_bus_id": attempt(lambda: pynvml.nvmlDeviceGetPciInfo(handle).busId),
        "mig_mode": attempt(lambda: pynvml.nvmlDeviceGetMigMode(handle)),
        "memory_v1": attempt(memory),
        "memory_v2": attempt(lambda: memory(pynvml.nvmlMemory_v2)),
        "utilization_rates": util
        if isinstance(util, str)
        else {"gpu": util.gpu, "memory": util.memory},
        "samples_buffer": attempt(sample_buffer),
        "power_mw": attempt(lambda: pynvml.nvmlDeviceGetPowerUsage(handle)),
        "enforced_power_limit_mw": attempt(lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle)),
        "temperature_v": attempt(lambda: pynvml.nvmlDeviceGetTemperatureV(handle, 0)),
        "temperature_legacy": attempt(lambda: pynvml.nvmlDeviceGetTemperature(handle, 0)),
        "processes": attempt(processes),
        "clock_event_reasons": reasons(
            attempt(lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
        ),
        "supported_clock_event_reasons": reasons(
            attempt(lambda: pynvml.nvmlDeviceGetSupportedClocksEventReasons(handle))
        ),
        "call_us_median": {name: median_us(fn, 10) for name, fn in calls.items()},
    }


def show(title: str, value: Any, indent: int = 0) -> None:
    pad = "  " * indent
    if isinstance(value, dict):
        print(f"{pad}{title}:")
        for key, item in value.items():
            show(str(key), item, indent + 1)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        print(f"{pad}{title}:")
        for n, item in enumerate(value):
            show(f"[{n}]", item, indent + 1)
    else:
        print(f"{pad}{title}: {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Probe NVML once: what the governor's NvmlSource reads, and raw facts.",
        epilog="fake scenarios (for --fake):\n  " + "\n  ".join(describe_scenarios()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--fake", metavar="SCENARIO", help="run against the fake NVML instead")
    parser.add_argument("--polls", type=int, default=20, help="polls timed (default 20)")
    parser.add_argument(
        "--window", type=float, default=1.0, help="seconds to count new samples (default 1)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write everything as JSON here")
    args = parser.parse_args(argv)

    try:
        fake = FakeNvml(args.fake).install() if args.fake else None
    except ValueError as exc:
        parser.error(str(exc))
    try:
        report: dict[str, Any] = {"fake": args.fake, "adapter": adapter_view(args.polls)}
        if report["adapter"]["available"]:
            report["raw"] = attempt(lambda: raw_facts(args.window))
    finally:
        if fake is not None:
            fake.uninstall()

    show(
        "NvmlSource" + (f" over the fake NVML ({args.fake})" if args.fake else ""),
        report["adapter"],
    )
    if not report["adapter"]["available"]:
        print(f"\n{report['adapter']['unavailable_reason']}: nothing more to probe.")
    else:
        show("raw NVML", report["raw"])
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
