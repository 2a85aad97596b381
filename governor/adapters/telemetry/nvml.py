"""GPU telemetry from NVML through nvidia-ml-py (module `pynvml`).

`NvmlSource.read()` never raises for a missing package, library, driver or GPU: it returns a
`Reading` that says so. NVML is initialised lazily under a lock on the first read; a failed
init is retried at most every `RETRY_INIT_S`, so a driver that appears later is picked up.

Per GPU, a metric the GPU or driver cannot give (NotSupported, FunctionNotFound, NoPermission,
a wrapper this binding lacks) becomes None and that function is not asked again for that UUID
(nvitop's `nvmlQuery` pattern). Any other NVML error on one GPU (GpuIsLost above all) becomes
a `DeviceProblem` for that GPU, and the poll goes on with the others.

Utilization drains the driver's buffered samples since the previous poll
(`nvmlDeviceGetSamples`), so a poll every few seconds sees every ~1/6 s sample, not one point.
The traps behind these choices are the binding's: see the comments where each is handled.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import fmean
from types import ModuleType
from typing import Any

from governor.domain.ports import Clock
from governor.domain.telemetry import DeviceProblem, GpuProcess, GpuSample, Reading

RETRY_INIT_S = 60.0

# NVML return codes (C enum values: stable across driver and binding versions).
NO_PERMISSION = 4
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
LIB_RM_VERSION_MISMATCH = 18
ARGUMENT_VERSION_MISMATCH = 25
GPU_NOT_FOUND = 28
UNKNOWN = 999

UNSUPPORTED = frozenset({3, NO_PERMISSION, FUNCTION_NOT_FOUND, ARGUMENT_VERSION_MISMATCH})
LOST = frozenset({GPU_IS_LOST, GPU_NOT_FOUND, UNKNOWN})

GPU_UTILIZATION_SAMPLES = 1  # NVML_GPU_UTILIZATION_SAMPLES
TEMPERATURE_GPU = 0  # NVML_TEMPERATURE_GPU
# nvmlValueType_t -> the field of the c_nvmlValue_t union that holds the sample
_SAMPLE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}

_INIT_REASONS = {
    LIBRARY_NOT_FOUND: "libnvidia-ml.so.1 not found: no NVIDIA driver on this machine",
    DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded",
    NO_PERMISSION: "no permission to talk to the NVIDIA driver",
    LIB_RM_VERSION_MISMATCH: (
        "the NVML library and the kernel driver differ in version "
        "(driver upgraded without reloading it)"
    ),
    GPU_NOT_FOUND: "the driver found no NVIDIA GPU",
}


class _CallFailed(Exception):
    """An NVML call on one GPU failed in a way that is not "unsupported"."""

    def __init__(self, function: str, error: Exception) -> None:
        super().__init__(f"{function}: {error}")
        self.code: int | None = getattr(error, "value", None)


@dataclass
class _Device:
    """What the source remembers about one GPU (by UUID) between polls."""

    last_sample_us: int = 0  # timestamp of the newest utilization sample seen
    unsupported: set[str] = field(default_factory=set)  # NVML functions not to ask again


class NvmlSource:
    """A `TelemetrySource` over NVML. `nvml` is the pynvml module (imported lazily if None)."""

    def __init__(self, clock: Clock, nvml: ModuleType | None = None) -> None:
        self._clock = clock
        self._nvml = nvml
        self._lock = threading.Lock()
        self._initialised = False
        self._failure: str | None = None
        self._retry_at: datetime | None = None
        self._driver_version: str | None = None
        self._devices: dict[str, _Device] = {}
        self._uuid_by_index: dict[int, str] = {}
        self._process_names: dict[int, str | None] = {}  # pid -> NVML's name, while it runs

    def read(self) -> Reading:
        at = self._clock.now()
        with self._lock:
            failure = self._ensure_initialised(at)
            if failure is not None:
                return Reading(at, available=False, unavailable_reason=failure)
            return self._poll(at)

    def close(self) -> None:
        with self._lock:
            if not self._initialised:
                return
            self._initialised = False
            with contextlib.suppress(self._loaded.NVMLError):  # shutting down anyway
                self._loaded.nvmlShutdown()

    @property
    def _loaded(self) -> ModuleType:
        """The pynvml module: imported (or given) before anything asks NVML."""
        assert self._nvml is not None, "NVML asked before it was imported"
        return self._nvml

    # -- init ---------------------------------------------------------------------------------

    def _ensure_initialised(self, at: datetime) -> str | None:
        """None once NVML is up; else the "no NVML" reason (init retried every RETRY_INIT_S)."""
        if self._initialised:
            return None
        if self._retry_at is not None and at < self._retry_at:
            return self._failure
        self._failure = self._initialise()
        self._initialised = self._failure is None
        self._retry_at = None if self._initialised else at + timedelta(seconds=RETRY_INIT_S)
        return self._failure

    def _initialise(self) -> str | None:
        try:
            if self._nvml is None:
                self._nvml = importlib.import_module("pynvml")
        except ImportError:
            return "no NVML: nvidia-ml-py (module pynvml) is not installed"
        try:
            self._nvml.nvmlInit()
        except Exception as exc:  # NVMLError, or a broken/shadowed pynvml: never crash a poll
            code = getattr(exc, "value", None)  # an NVMLError's; another exception has none
            known = _INIT_REASONS.get(code) if isinstance(code, int) else None
            plain = known or f"nvmlInit failed: {type(exc).__name__}: {exc}"
            return f"no NVML: {plain}"
        try:
            self._driver_version = _text(self._query(_Device(), "nvmlSystemGetDriverVersion"))
        except _CallFailed:
            self._driver_version = None
        return None

    # -- poll ---------------------------------------------------------------------------------

    def _poll(self, at: datetime) -> Reading:
        nvml = self._loaded
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            return Reading(
                at,
                available=False,
                unavailable_reason=f"NVML cannot count the GPUs: {exc}",
                driver_version=self._driver_version,
            )
        gpus: list[GpuSample] = []
        problems: list[DeviceProblem] = []
        for index in range(count):
            uuid = self._uuid_by_index.get(index)
            try:
                handle = self._call("nvmlDeviceGetHandleByIndex", index)
                uuid = _decoded(self._call("nvmlDeviceGetUUID", handle))
                self._uuid_by_index[index] = uuid
                gpus.append(self._sample(index, uuid, handle))
            except _CallFailed as failed:
                problems.append(DeviceProblem(index, uuid, str(failed), failed.code in LOST))
            except UnicodeDecodeError as exc:  # a garbled string from the driver (nvitop too)
                problems.append(DeviceProblem(index, uuid, f"undecodable text: {exc}", False))
        running = {p.pid for g in gpus for p in g.processes or ()}
        self._process_names = {k: v for k, v in self._process_names.items() if k in running}
        return Reading(at, tuple(gpus), tuple(problems), driver_version=self._driver_version)

    def _sample(self, index: int, uuid: str, handle: Any) -> GpuSample:
        device = self._devices.setdefault(uuid, _Device())
        utilization, utilization_max = self._utilization(device, handle)
        memory = self._memory(device, handle)
        power_mw = self._query(device, "nvmlDeviceGetPowerUsage", handle)
        processes = self._query(device, "nvmlDeviceGetComputeRunningProcesses", handle)
        return GpuSample(
            uuid=uuid,
            index=index,
            name=_text(self._query(device, "nvmlDeviceGetName", handle)) or "unknown",
            utilization_pct=utilization,
            utilization_max_pct=utilization_max,
            memory_total_bytes=None if memory is None else int(memory.total),
            memory_used_bytes=None if memory is None else int(memory.used),
            memory_free_bytes=None if memory is None else int(memory.free),
            power_w=None if power_mw is None else power_mw / 1000,
            temperature_c=self._temperature(device, handle),
            processes=None
            if processes is None
            else tuple(
                GpuProcess(int(p.pid), p.usedGpuMemory, self._process_name(int(p.pid)))
                for p in processes
            ),
            clock_event_reasons=self._query(
                device, "nvmlDeviceGetCurrentClocksEventReasons", handle
            ),
        )

    def _process_name(self, pid: int) -> str | None:
        """NVML's name for a process (usually its executable's path), asked once while it runs;
        None where the driver cannot say (a PID of another namespace, an older driver)."""
        if pid not in self._process_names:
            name = None
            if hasattr(self._nvml, "nvmlSystemGetProcessName"):
                with contextlib.suppress(_CallFailed, UnicodeDecodeError):
                    name = _text(self._call("nvmlSystemGetProcessName", pid)) or None
            self._process_names[pid] = name
        return self._process_names[pid]

    def _utilization(self, device: _Device, handle: Any) -> tuple[float | None, float | None]:
        """Mean and max of the samples since the last poll; else the driver's last window."""
        drained = self._query(
            device,
            "nvmlDeviceGetSamples",
            handle,
            GPU_UTILIZATION_SAMPLES,
            device.last_sample_us,
            none_on=(NOT_FOUND,),  # NOT_FOUND: no new sample since last_sample_us
        )
        if drained:
            value_type, samples = drained
            if samples:
                device.last_sample_us = max(s.timeStamp for s in samples)
                field_name = _SAMPLE_FIELDS.get(value_type, "uiVal")
                values = [float(getattr(s.sampleValue, field_name)) for s in samples]
                return fmean(values), max(values)
        rates = self._query(device, "nvmlDeviceGetUtilizationRates", handle)
        return (None, None) if rates is None else (float(rates.gpu), float(rates.gpu))

    def _memory(self, device: _Device, handle: Any) -> Any:
        """The v2 struct (used without the driver's reserve) where the driver has it, else v1."""
        version = getattr(self._nvml, "nvmlMemory_v2", None)
        memory = None
        if version is not None:
            memory = self._query(
                device, "nvmlDeviceGetMemoryInfo", handle, version=version, key="memory_v2"
            )
        return memory or self._query(device, "nvmlDeviceGetMemoryInfo", handle)

    def _temperature(self, device: _Device, handle: Any) -> float | None:
        celsius = self._query(device, "nvmlDeviceGetTemperatureV", handle, TEMPERATURE_GPU)
        if celsius is None:
            celsius = self._query(device, "nvmlDeviceGetTemperature", handle, TEMPERATURE_GPU)
        return None if celsius is None else float(celsius)

    # -- calling NVML -------------------------------------------------------------------------

    def _call(self, function: str, *args: Any, **kwargs: Any) -> Any:
        """Call one pynvml function; an NVML error becomes `_CallFailed` naming the function."""
        try:
            return getattr(self._loaded, function)(*args, **kwargs)
        except self._loaded.NVMLError as exc:
            raise _CallFailed(function, exc) from exc

    def _query(
        self,
        device: _Device,
        function: str,
        *args: Any,
        key: str | None = None,
        none_on: tuple[int, ...] = (),
        **kwargs: Any,
    ) -> Any:
        """Call `function`; None if this GPU cannot answer it, and then never ask it again.

        `none_on`: codes that mean "nothing this time" (None, but ask again next poll).
        `key` names the call in the unsupported memo when one function has several forms.
        """
        key = key or function
        if key in device.unsupported:
            return None
        if hasattr(self._nvml, function):
            try:
                return self._call(function, *args, **kwargs)
            except _CallFailed as failed:
                if failed.code in none_on:
                    return None
                if failed.code not in UNSUPPORTED:
                    raise
            except self._loaded.NVMLLibraryMismatchError:
                pass  # unversioned wrapper whose _vN symbol this driver lacks: unsupported
        device.unsupported.add(key)
        return None


def _text(value: str | bytes | None) -> str | None:
    """Text NVML may not give: None stays None."""
    return None if value is None else _decoded(value)


def _decoded(value: str | bytes) -> str:
    """Older bindings return bytes where 11.515+ return str: accept both."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value
