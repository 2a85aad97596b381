"""A fake NVML at the C driver layer: scripted GPUs for tests, the demo and benchmarks.

The real pynvml wrappers run unchanged. Installing the fake sets `pynvml.nvmlLib` (so no
shared library is loaded) and fills `pynvml._nvmlGetFunctionPointer_cache` with Python
functions named like the C symbols; they write through ctypes `byref(...)._obj`, fill structs
and return NVML_SUCCESS or NVML_ERROR_* codes, as libnvidia-ml.so.1 would. A symbol the fake
does not provide behaves like one the driver lacks: NVMLError_FunctionNotFound.
It relies on pynvml's private names (present in nvidia-ml-py 12.x and 13.x).

Each fake GPU follows a timeline: a function of the seconds elapsed since the fake was
installed, read from an injected `monotonic` so tests can drive time. Named scenarios build
the GPUs; `parse_scenario("deadlock:train_s=2")` picks one and sets its knobs.

    with FakeNvml("gpu-lost:lost_s=1", monotonic=clock) as fake:
        reading = NvmlSource(system_clock).read()
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pynvml

from governor.domain.telemetry import GIB

MIB = 1024**2

# NVML return codes the fake gives
SUCCESS = 0
INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3
NOT_FOUND = 6
INSUFFICIENT_SIZE = 7
LIBRARY_NOT_FOUND = 12
GPU_IS_LOST = 15
ARGUMENT_VERSION_MISMATCH = 25

# clock event reason bits (nvmlClocksEventReason*)
GPU_IDLE = 0x1
SW_POWER_CAP = 0x4

NOT_AVAILABLE = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE for unsigned long long
NOT_MIG = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId outside MIG

SAMPLE_PERIOD_US = 1_000_000 // 6  # the driver keeps a utilization sample every ~1/6 s
SAMPLE_BUFFER = 120  # samples the fake driver keeps (20 s); real depth is driver-defined
SAMPLE_EPOCH_US = 1_767_225_600_000_000  # sample timestamps: CPU µs, 2026-01-01 at install

H100 = "NVIDIA H100 80GB HBM3"
H100_TOTAL = 81559 * MIB
H100_RESERVED = 512 * MIB


@dataclass(frozen=True)
class GpuState:
    """What one fake GPU shows at one instant."""

    utilization_pct: float
    memory_used_bytes: int  # allocated (the v2 `used`); v1 `used` adds the reserve
    power_w: float
    temperature_c: float
    processes: tuple[tuple[int, int | None], ...] = ()  # (pid, used bytes or None)
    clock_event_reasons: int = 0
    lost: bool = False  # fallen off the bus: every call on this GPU answers GPU_IS_LOST


Timeline = Callable[[float], GpuState]


@dataclass(frozen=True)
class FakeGpu:
    name: str
    uuid: str
    timeline: Timeline
    memory_total_bytes: int = H100_TOTAL
    memory_reserved_bytes: int = H100_RESERVED
    errors: Mapping[str, int] = field(default_factory=dict)  # C symbol -> NVML code it answers


@dataclass(frozen=True)
class Scenario:
    name: str
    gpus: tuple[FakeGpu, ...]
    driver_version: str = "570.133.20"
    init_error: int | None = None  # nvmlInitWithFlags answers this code
    missing_symbols: frozenset[str] = frozenset()  # C symbols this "driver" lacks
    bytes_strings: bool = False  # wrappers return bytes, as bindings before 11.515 did
    process_names: Mapping[int, str] = field(default_factory=dict)  # pid -> NVML's name


# -- timelines ----------------------------------------------------------------------------------


def uuid_for(index: int) -> str:
    return f"GPU-5ca1ab1e-0000-4000-8000-{index:012x}"


def training(t: float, index: int = 0, used: int = 60 * GIB) -> GpuState:
    """A busy training step loop: util 92-98 %, ~640 W, one process holding the memory."""
    wobble = math.sin(1.3 * t + index)
    return GpuState(
        utilization_pct=95 + 3 * wobble,
        memory_used_bytes=used,
        power_w=640 + 25 * wobble,
        temperature_c=67 + index,
        processes=((4100 + index, used),),
    )


def _h100(index: int, timeline: Timeline, **overrides: Any) -> FakeGpu:
    return FakeGpu(H100, uuid_for(index), timeline, **overrides)


# -- scenarios ----------------------------------------------------------------------------------


def healthy(gpus: int = 1) -> Scenario:
    """Training on H100s: util ~95 %, 60 GiB of 80 GB used, ~640 W, one process per GPU."""
    return Scenario(
        "healthy",
        tuple(_h100(i, functools.partial(training, index=i)) for i in range(gpus)),
    )


def deadlock(train_s: float = 30.0, idle_w: float = 72.0) -> Scenario:
    """Trains for train_s, then hangs in merge/export: 0 %, 19.5 GiB held, idle power."""
    held = int(19.5 * GIB)

    def timeline(t: float) -> GpuState:
        if t < train_s:
            return training(t)
        return GpuState(0, held, idle_w, 41, ((4100, held),), GPU_IDLE)

    return Scenario("deadlock", (_h100(0, timeline),))


def compile_stall(compile_s: float = math.inf) -> Scenario:
    """Before step 0: a process with a flat 3 GiB, 0 % util (kernels compiling on the CPU)."""
    context = 3 * GIB

    def timeline(t: float) -> GpuState:
        if t >= compile_s:
            return training(t)
        return GpuState(0, context, 98, 39, ((4100, context),), GPU_IDLE)

    return Scenario("compile-stall", (_h100(0, timeline),))


def near_oom(ramp_s: float = 0.0) -> Scenario:
    """Util ~100 %; used grows from 70 GiB over ramp_s until 1.5 % of total is free."""
    start = 70 * GIB
    full = H100_TOTAL - H100_RESERVED - int(0.015 * H100_TOTAL)

    def timeline(t: float) -> GpuState:
        done = 1.0 if ramp_s <= 0 else min(1.0, t / ramp_s)
        used = start + int((full - start) * done)
        return GpuState(100, used, 695, 76, ((4100, used),), SW_POWER_CAP)

    return Scenario("near-oom", (_h100(0, timeline),))


def gpu_lost(lost_s: float = 10.0) -> Scenario:
    """Two GPUs training; GPU 1 falls off the bus at lost_s, GPU 0 keeps training."""

    def falls_off(t: float) -> GpuState:
        state = training(t, index=1)
        return replace(state, lost=True) if t >= lost_s else state

    return Scenario("gpu-lost", (_h100(0, training), _h100(1, falls_off)))


NEIGHBOUR_PID, HUNG_PID = 5200, 4101
NEIGHBOUR_PROCESS, HUNG_PROCESS = "/opt/serving/bin/inference-server", "/usr/bin/python3.11"


def shared() -> Scenario:
    """A shared machine: GPU 0 busy with a neighbour's (~55 %), GPU 1 hung at 0 %, 19.5 GiB held.
    The neighbour's process is an inference server (pid 5200), the job's Python (pid 4101)."""
    busy, held = 30 * GIB, int(19.5 * GIB)

    def neighbour(t: float) -> GpuState:
        wobble = math.sin(0.7 * t)
        return GpuState(55 + 5 * wobble, busy, 310 + 20 * wobble, 58, ((NEIGHBOUR_PID, busy),))

    def hung(t: float) -> GpuState:
        return GpuState(0, held, 72, 41, ((HUNG_PID, held),), GPU_IDLE)

    names = {NEIGHBOUR_PID: NEIGHBOUR_PROCESS, HUNG_PID: HUNG_PROCESS}
    return Scenario("shared", (_h100(0, neighbour), _h100(1, hung)), process_names=names)


def unsupported() -> Scenario:
    """An A10G whose power, process list and utilization samples are NotSupported."""
    gpu = FakeGpu(
        "NVIDIA A10G",
        uuid_for(0),
        lambda t: training(t, used=18 * GIB),
        memory_total_bytes=23028 * MIB,
        memory_reserved_bytes=250 * MIB,
        errors={
            "nvmlDeviceGetPowerUsage": NOT_SUPPORTED,
            "nvmlDeviceGetComputeRunningProcesses_v3": NOT_SUPPORTED,
            "nvmlDeviceGetSamples": NOT_SUPPORTED,
        },
    )
    return Scenario("unsupported", (gpu,))


def old_bindings() -> Scenario:
    """One training GPU; name, UUID and driver version come back as bytes (bindings < 11.515)."""
    return Scenario("old-bindings", (_h100(0, training),), bytes_strings=True)


def old_driver() -> Scenario:
    """A100 on driver 470: no memory _v2, no TemperatureV, no process _v3, no event reasons."""
    gpu = FakeGpu(
        "NVIDIA A100-SXM4-40GB",
        uuid_for(0),
        lambda t: training(t, used=30 * GIB),
        memory_total_bytes=40536 * MIB,
        memory_reserved_bytes=400 * MIB,
    )
    missing = {
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetCurrentClocksEventReasons",
    }
    return Scenario("old-driver", (gpu,), "470.256.02", missing_symbols=frozenset(missing))


def no_nvml() -> Scenario:
    """No driver: init fails as NVMLError_LibraryNotFound."""
    return Scenario("no-nvml", (), init_error=LIBRARY_NOT_FOUND)


SCENARIOS: dict[str, Callable[..., Scenario]] = {
    "healthy": healthy,
    "deadlock": deadlock,
    "compile-stall": compile_stall,
    "near-oom": near_oom,
    "gpu-lost": gpu_lost,
    "shared": shared,
    "unsupported": unsupported,
    "old-bindings": old_bindings,
    "old-driver": old_driver,
    "no-nvml": no_nvml,
}


def parse_scenario(spec: str) -> Scenario:
    """'name' or 'name:knob=value,knob=value', e.g. 'deadlock:train_s=2' or 'healthy:gpus=8'."""
    name, _, knobs = spec.partition(":")
    builder = SCENARIOS.get(name.strip())
    if builder is None:
        raise ValueError(f"unknown fake NVML scenario {name!r}; known: {', '.join(SCENARIOS)}")
    params = inspect.signature(builder).parameters
    kwargs: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in knobs.split(","))):
        key, eq, value = (part.strip() for part in item.partition("="))
        if not eq or key not in params:
            takes = ", ".join(f"{p.name}={p.default}" for p in params.values()) or "no knobs"
            raise ValueError(f"scenario {name!r} takes {takes}; got {item!r}")
        try:
            kwargs[key] = type(params[key].default)(value)
        except ValueError:
            raise ValueError(f"scenario {name!r}: {key} must be a number, got {value!r}") from None
    return builder(**kwargs)


def describe_scenarios() -> list[str]:
    """One line per scenario: its spec with default knobs, and what it shows."""
    lines = []
    for name, builder in SCENARIOS.items():
        params = inspect.signature(builder).parameters.values()
        knobs = ",".join(f"{p.name}={p.default}" for p in params)
        doc = (builder.__doc__ or "").strip().splitlines()[0]
        lines.append(f"{name}{':' + knobs if knobs else ''}  {doc}")
    return lines


# -- the fake driver ----------------------------------------------------------------------------


class _FakeLibrary:
    """Stands in for the CDLL: has no symbols, so an un-faked one is FunctionNotFound."""


_STRING_WRAPPERS = ("nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlSystemGetDriverVersion")


@dataclass
class _Saved:
    nvml_lib: Any
    cache: dict[str, Any]
    refcount: int
    wrappers: dict[str, Any] = field(default_factory=dict)


class FakeNvml:
    """Installs a scenario's GPUs under pynvml; a context manager that restores pynvml after.

    `calls` counts the calls per C symbol, so tests can see what the adapter asked for.
    """

    def __init__(
        self, scenario: Scenario | str, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.scenario = parse_scenario(scenario) if isinstance(scenario, str) else scenario
        self.calls: Counter[str] = Counter()
        self._monotonic = monotonic
        self._t0 = 0.0
        self._saved: _Saved | None = None

    def __enter__(self) -> FakeNvml:
        return self.install()

    def __exit__(self, *exc_info: object) -> None:
        self.uninstall()

    @property
    def installed(self) -> bool:
        return self._saved is not None

    def elapsed(self) -> float:
        return self._monotonic() - self._t0

    def install(self) -> FakeNvml:
        if self._saved is not None or isinstance(pynvml.nvmlLib, _FakeLibrary):
            raise RuntimeError("a fake NVML is already installed")
        cache = pynvml._nvmlGetFunctionPointer_cache
        with pynvml.libLoadLock:
            self._saved = _Saved(pynvml.nvmlLib, dict(cache), pynvml._nvmlLib_refcount)
            pynvml.nvmlLib = _FakeLibrary()
            pynvml._nvmlLib_refcount = 0
            cache.clear()
            cache.update(self._symbols())
        if self.scenario.bytes_strings:
            for name in _STRING_WRAPPERS:
                self._saved.wrappers[name] = getattr(pynvml, name)
                setattr(pynvml, name, _returning_bytes(getattr(pynvml, name)))
        self._t0 = self._monotonic()
        return self

    def uninstall(self) -> None:
        saved, self._saved = self._saved, None
        if saved is None:
            return
        for name, wrapper in saved.wrappers.items():
            setattr(pynvml, name, wrapper)
        cache = pynvml._nvmlGetFunctionPointer_cache
        with pynvml.libLoadLock:
            cache.clear()
            cache.update(saved.cache)
            pynvml.nvmlLib = saved.nvml_lib
            pynvml._nvmlLib_refcount = saved.refcount

    # -- symbol table ---------------------------------------------------------------------------

    def _symbols(self) -> dict[str, Callable[..., int]]:
        system: dict[str, Callable[..., int]] = {
            "nvmlInitWithFlags": self._init,
            "nvmlShutdown": lambda: SUCCESS,
            "nvmlSystemGetDriverVersion": self._driver_version,
            "nvmlDeviceGetCount_v2": self._count,
            "nvmlDeviceGetHandleByIndex_v2": self._handle,
            "nvmlSystemGetProcessName": self._process_name,
        }
        device: dict[str, Callable[..., int]] = {
            "nvmlDeviceGetName": self._name,
            "nvmlDeviceGetUUID": self._uuid,
            "nvmlDeviceGetIndex": self._index,
            "nvmlDeviceGetSamples": self._samples,
            "nvmlDeviceGetUtilizationRates": self._utilization,
            "nvmlDeviceGetMemoryInfo": self._memory_v1,
            "nvmlDeviceGetMemoryInfo_v2": self._memory_v2,
            "nvmlDeviceGetPowerUsage": self._power,
            "nvmlDeviceGetTemperature": self._temperature,
            "nvmlDeviceGetTemperatureV": self._temperature_v,
            "nvmlDeviceGetComputeRunningProcesses_v3": self._processes,
            "nvmlDeviceGetCurrentClocksEventReasons": self._clock_event_reasons,
        }
        table = {name: self._counted(name, fn) for name, fn in system.items()}
        table.update({name: self._on_device(name, fn) for name, fn in device.items()})
        return {k: v for k, v in table.items() if k not in self.scenario.missing_symbols}

    def _counted(self, name: str, fn: Callable[..., int]) -> Callable[..., int]:
        def symbol(*args: Any) -> int:
            self.calls[name] += 1
            return fn(*args)

        return symbol

    def _on_device(self, name: str, fn: Callable[..., int]) -> Callable[..., int]:
        """A device symbol: resolve the handle; a lost GPU or a scripted error answers first."""

        def symbol(handle: Any, *args: Any) -> int:
            self.calls[name] += 1
            index = (ctypes.cast(handle, ctypes.c_void_p).value or 0) - 1
            if not 0 <= index < len(self.scenario.gpus):
                return INVALID_ARGUMENT
            gpu = self.scenario.gpus[index]
            state = gpu.timeline(self.elapsed())
            if state.lost:
                return GPU_IS_LOST
            if name in gpu.errors:
                return gpu.errors[name]
            return fn(index, gpu, state, *args)

        return symbol

    # -- system symbols -------------------------------------------------------------------------

    def _init(self, flags: int) -> int:
        return self.scenario.init_error or SUCCESS

    def _driver_version(self, buffer: Any, size: Any) -> int:
        return _write_text(buffer, size, self.scenario.driver_version)

    def _process_name(self, pid: Any, buffer: Any, size: Any) -> int:
        name = self.scenario.process_names.get(pid.value)
        return NOT_FOUND if name is None else _write_text(buffer, size, name)

    def _count(self, count: Any) -> int:
        count._obj.value = len(self.scenario.gpus)
        return SUCCESS

    def _handle(self, index: Any, device: Any) -> int:
        i = index.value
        if i >= len(self.scenario.gpus):
            return INVALID_ARGUMENT
        if self.scenario.gpus[i].timeline(self.elapsed()).lost:
            return GPU_IS_LOST
        ctypes.c_void_p.from_buffer(device._obj).value = i + 1  # handle = index + 1, not NULL
        return SUCCESS

    # -- device symbols: (index, gpu, state, *C arguments) --------------------------------------

    def _name(self, index: int, gpu: FakeGpu, state: GpuState, buffer: Any, size: Any) -> int:
        return _write_text(buffer, size, gpu.name)

    def _uuid(self, index: int, gpu: FakeGpu, state: GpuState, buffer: Any, size: Any) -> int:
        return _write_text(buffer, size, gpu.uuid)

    def _index(self, index: int, gpu: FakeGpu, state: GpuState, out: Any) -> int:
        out._obj.value = index
        return SUCCESS

    def _samples(
        self,
        index: int,
        gpu: FakeGpu,
        state: GpuState,
        sampling_type: Any,
        last_seen_us: Any,
        value_type: Any,
        count: Any,
        samples: Any,
    ) -> int:
        """Utilization samples every ~1/6 s since last_seen_us (0: the whole buffer)."""
        if sampling_type.value != pynvml.NVML_GPU_UTILIZATION_SAMPLES:
            return NOT_SUPPORTED
        newest = round(self.elapsed() * 1e6) // SAMPLE_PERIOD_US
        after = max(0, (last_seen_us.value - SAMPLE_EPOCH_US) // SAMPLE_PERIOD_US)
        first = max(after + 1, newest - SAMPLE_BUFFER + 1, 1)
        if first > newest:
            return NOT_FOUND
        value_type._obj.value = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
        if samples is None:  # sizing call
            count._obj.value = newest - first + 1
            return SUCCESS
        n = min(count._obj.value, len(samples), newest - first + 1)
        for i, k in enumerate(range(first, first + n)):
            at_us = k * SAMPLE_PERIOD_US
            samples[i].timeStamp = SAMPLE_EPOCH_US + at_us
            samples[i].sampleValue.uiVal = round(gpu.timeline(at_us / 1e6).utilization_pct)
        count._obj.value = n
        return SUCCESS

    def _utilization(self, index: int, gpu: FakeGpu, state: GpuState, out: Any) -> int:
        out._obj.gpu = round(state.utilization_pct)
        out._obj.memory = round(state.utilization_pct * 0.45)
        return SUCCESS

    def _memory_v1(self, index: int, gpu: FakeGpu, state: GpuState, out: Any) -> int:
        used = state.memory_used_bytes + gpu.memory_reserved_bytes  # v1 lumps the reserve in
        out._obj.total = gpu.memory_total_bytes
        out._obj.used = used
        out._obj.free = gpu.memory_total_bytes - used
        return SUCCESS

    def _memory_v2(self, index: int, gpu: FakeGpu, state: GpuState, out: Any) -> int:
        if out._obj.version != pynvml.nvmlMemory_v2:
            return ARGUMENT_VERSION_MISMATCH
        out._obj.total = gpu.memory_total_bytes
        out._obj.reserved = gpu.memory_reserved_bytes
        out._obj.used = state.memory_used_bytes
        out._obj.free = gpu.memory_total_bytes - gpu.memory_reserved_bytes - state.memory_used_bytes
        return SUCCESS

    def _power(self, index: int, gpu: FakeGpu, state: GpuState, milliwatts: Any) -> int:
        milliwatts._obj.value = round(state.power_w * 1000)
        return SUCCESS

    def _temperature(self, index: int, gpu: FakeGpu, state: GpuState, sensor: Any, out: Any) -> int:
        if sensor.value != pynvml.NVML_TEMPERATURE_GPU:
            return NOT_SUPPORTED
        out._obj.value = round(state.temperature_c)
        return SUCCESS

    def _temperature_v(self, index: int, gpu: FakeGpu, state: GpuState, out: Any) -> int:
        if out._obj.version != pynvml.nvmlTemperature_v1:
            return ARGUMENT_VERSION_MISMATCH
        if out._obj.sensorType != pynvml.NVML_TEMPERATURE_GPU:
            return NOT_SUPPORTED
        out._obj.temperature = round(state.temperature_c)
        return SUCCESS

    def _processes(self, index: int, gpu: FakeGpu, state: GpuState, count: Any, infos: Any) -> int:
        """Two-call protocol: NULL array sizes (SUCCESS = none); too small: INSUFFICIENT_SIZE."""
        processes = state.processes
        if infos is None or count._obj.value < len(processes):
            count._obj.value = len(processes)
            return INSUFFICIENT_SIZE if processes else SUCCESS
        for info, (pid, used) in zip(infos, processes, strict=False):
            info.pid = pid
            info.usedGpuMemory = NOT_AVAILABLE if used is None else used
            info.gpuInstanceId = info.computeInstanceId = NOT_MIG
        count._obj.value = len(processes)
        return SUCCESS

    def _clock_event_reasons(self, index: int, gpu: FakeGpu, state: GpuState, out: Any) -> int:
        out._obj.value = state.clock_event_reasons
        return SUCCESS


def _write_text(buffer: Any, size: Any, text: str) -> int:
    raw = text.encode()
    if len(raw) >= size.value:
        return INSUFFICIENT_SIZE
    buffer.value = raw
    return SUCCESS


def _returning_bytes(wrapper: Callable[..., str]) -> Callable[..., bytes]:
    @functools.wraps(wrapper)
    def old_style(*args: Any, **kwargs: Any) -> bytes:
        return wrapper(*args, **kwargs).encode()

    return old_style
