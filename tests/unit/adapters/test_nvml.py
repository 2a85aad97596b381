"""NvmlSource driven through the fake NVML driver layer: the real pynvml wrappers run unchanged."""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pynvml
import pytest

from governor.adapters.telemetry.nvml import RETRY_INIT_S, NvmlSource
from governor.domain.telemetry import GpuProcess, GpuSample, Reading
from governor.fakes.nvml import (
    GIB,
    GPU_IDLE,
    H100_RESERVED,
    H100_TOTAL,
    HUNG_PID,
    HUNG_PROCESS,
    MIB,
    NEIGHBOUR_PID,
    NEIGHBOUR_PROCESS,
    SAMPLE_BUFFER,
    SCENARIOS,
    SW_POWER_CAP,
    FakeGpu,
    FakeNvml,
    GpuState,
    Scenario,
    describe_scenarios,
    healthy,
    parse_scenario,
    training,
    uuid_for,
)
from tests.clock import FrozenClock

RESET_REQUIRED = 16
NO_PERMISSION = 4


class ManualMonotonic:
    """Stands in for time.monotonic: seconds pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def monotonic() -> ManualMonotonic:
    return ManualMonotonic()


class Rig:
    """A fake driver and an NvmlSource over it, sharing one notion of time."""

    def __init__(self, fake: FakeNvml, clock: FrozenClock, monotonic: ManualMonotonic) -> None:
        self.fake = fake
        self.clock = clock
        self.monotonic = monotonic
        self.source = NvmlSource(clock)

    def read_at(self, elapsed_s: float) -> Reading:
        """Poll when `elapsed_s` seconds have passed since the fake was installed."""
        self.clock.advance(elapsed_s - self.fake.elapsed())
        self.monotonic.now = 1000.0 + elapsed_s
        return self.source.read()


@pytest.fixture
def rig(
    request: pytest.FixtureRequest, clock: FrozenClock, monotonic: ManualMonotonic
) -> Iterator[Rig]:
    """Use with @pytest.mark.parametrize("rig", [spec or Scenario], indirect=True)."""
    with FakeNvml(request.param, monotonic=monotonic) as fake:
        rig = Rig(fake, clock, monotonic)
        yield rig
        rig.source.close()


def scenario(spec: str | Scenario) -> Any:
    name = spec if isinstance(spec, str) else spec.name
    return pytest.mark.parametrize("rig", [pytest.param(spec, id=name)], indirect=True)


def only_gpu(reading: Reading) -> GpuSample:
    assert reading.available, reading.unavailable_reason
    assert reading.problems == ()
    (gpu,) = reading.gpus
    return gpu


def one_gpu(name: str, timeline: Any, **gpu: Any) -> Scenario:
    return Scenario(name, (FakeGpu("NVIDIA H100 80GB HBM3", uuid_for(0), timeline, **gpu),))


# -- scenarios ------------------------------------------------------------------------------------


@scenario("healthy")
def test_healthy_gpu_reports_every_field_from_the_real_wrappers(rig: Rig) -> None:
    reading = rig.read_at(3.0)
    gpu = only_gpu(reading)

    assert reading.at == rig.clock.now()
    assert reading.driver_version == "570.133.20"
    assert (gpu.index, gpu.uuid, gpu.name) == (0, uuid_for(0), "NVIDIA H100 80GB HBM3")
    assert 92 <= gpu.utilization_pct <= 98
    assert gpu.utilization_pct <= gpu.utilization_max_pct <= 98
    assert gpu.memory_total_bytes == H100_TOTAL
    assert gpu.memory_used_bytes == 60 * GIB  # the v2 `used`: without the driver's reserve
    assert gpu.memory_free_bytes == H100_TOTAL - H100_RESERVED - 60 * GIB
    assert 610 <= gpu.power_w <= 670
    assert gpu.temperature_c == 67.0
    assert gpu.processes == (GpuProcess(4100, 60 * GIB),)
    assert gpu.clock_event_reasons == 0


@scenario("healthy:gpus=8")
def test_healthy_with_eight_gpus_reports_eight_distinct_gpus(rig: Rig) -> None:
    reading = rig.read_at(1.0)

    assert [gpu.index for gpu in reading.gpus] == list(range(8))
    assert len({gpu.uuid for gpu in reading.gpus}) == 8
    assert [gpu.processes[0].pid for gpu in reading.gpus] == list(range(4100, 4108))


@scenario("deadlock:train_s=2")
def test_deadlock_holds_memory_at_zero_util_and_idle_power_after_training(rig: Rig) -> None:
    training_gpu = only_gpu(rig.read_at(1.0))
    assert training_gpu.utilization_pct > 90
    assert training_gpu.clock_event_reasons == 0

    rig.read_at(3.0)  # drains the samples around the switch
    hung = only_gpu(rig.read_at(6.0))

    assert hung.utilization_pct == 0.0
    assert hung.utilization_max_pct == 0.0
    assert hung.memory_used_bytes == int(19.5 * GIB)
    assert hung.power_w == 72.0
    assert hung.clock_event_reasons & GPU_IDLE
    assert hung.processes == (GpuProcess(4100, int(19.5 * GIB)),)


@scenario("deadlock:train_s=2")
def test_a_poll_spanning_the_hang_averages_training_and_idle_samples(rig: Rig) -> None:
    rig.read_at(1.0)
    spanning = only_gpu(rig.read_at(3.0))  # 6 training samples (1-2 s), 6 idle (2-3 s)

    assert spanning.utilization_max_pct > 90
    assert 40 < spanning.utilization_pct < 55


@scenario("compile-stall")
def test_compile_stall_shows_a_process_with_flat_modest_memory_and_no_util(rig: Rig) -> None:
    first = only_gpu(rig.read_at(2.0))
    later = only_gpu(rig.read_at(120.0))

    for gpu in (first, later):
        assert gpu.utilization_pct == gpu.utilization_max_pct == 0.0
        assert gpu.memory_used_bytes == 3 * GIB
        assert gpu.processes == (GpuProcess(4100, 3 * GIB),)


@scenario("compile-stall:compile_s=5")
def test_compile_stall_with_a_compile_time_starts_training_afterwards(rig: Rig) -> None:
    rig.read_at(6.0)
    assert only_gpu(rig.read_at(9.0)).utilization_pct > 90


@scenario("near-oom")
def test_near_oom_leaves_under_three_percent_free_at_full_util(rig: Rig) -> None:
    gpu = only_gpu(rig.read_at(1.0))

    assert gpu.utilization_pct == 100.0
    assert gpu.free_ratio < 0.03
    assert gpu.clock_event_reasons & SW_POWER_CAP


@scenario("near-oom:ramp_s=10")
def test_near_oom_with_a_ramp_shows_free_memory_shrinking(rig: Rig) -> None:
    ratios = [only_gpu(rig.read_at(t)).free_ratio for t in (0.0, 5.0, 10.0, 20.0)]

    assert ratios[0] > ratios[1] > ratios[2] == ratios[3]
    assert ratios[0] > 0.1
    assert ratios[2] < 0.03


@scenario("gpu-lost:lost_s=2")
def test_a_lost_gpu_becomes_a_problem_while_the_other_keeps_reporting(rig: Rig) -> None:
    before = rig.read_at(1.0)
    assert [gpu.index for gpu in before.gpus] == [0, 1]

    for elapsed in (3.0, 4.0):
        after = rig.read_at(elapsed)
        assert after.available
        (gpu0,) = after.gpus
        assert gpu0.index == 0
        assert gpu0.utilization_pct > 90
        (problem,) = after.problems
        assert problem.index == 1
        assert problem.uuid == uuid_for(1)  # remembered from the poll before it was lost
        assert problem.lost
        assert "GPU is lost" in problem.error


@scenario("gpu-lost:lost_s=0")
def test_a_gpu_lost_before_the_first_poll_has_no_known_uuid(rig: Rig) -> None:
    (problem,) = rig.read_at(1.0).problems

    assert (problem.index, problem.uuid, problem.lost) == (1, None, True)


@scenario("unsupported")
def test_unsupported_metrics_are_none_and_utilization_falls_back_to_rates(rig: Rig) -> None:
    gpu = only_gpu(rig.read_at(2.0))

    assert gpu.power_w is None
    assert gpu.processes is None
    assert gpu.utilization_pct == gpu.utilization_max_pct == round(training(2.0).utilization_pct)
    assert gpu.memory_used_bytes == 18 * GIB
    assert gpu.name == "NVIDIA A10G"


@scenario("unsupported")
def test_unsupported_functions_are_not_called_again_on_the_next_poll(rig: Rig) -> None:
    rig.read_at(1.0)
    rig.read_at(2.0)
    rig.read_at(3.0)

    calls = rig.fake.calls
    assert calls["nvmlDeviceGetPowerUsage"] == 1
    assert calls["nvmlDeviceGetComputeRunningProcesses_v3"] == 1
    assert calls["nvmlDeviceGetSamples"] == 1
    assert calls["nvmlDeviceGetUtilizationRates"] == 3
    assert calls["nvmlDeviceGetMemoryInfo_v2"] == 3


@scenario("old-bindings")
def test_old_bindings_returning_bytes_give_str_fields(rig: Rig) -> None:
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert isinstance(pynvml.nvmlDeviceGetUUID(handle), bytes)  # the fake does what it says

    reading = rig.read_at(1.0)
    gpu = only_gpu(reading)

    assert gpu.uuid == uuid_for(0)
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert reading.driver_version == "570.133.20"


@scenario("old-driver")
def test_old_driver_falls_back_to_v1_memory_and_legacy_temperature(rig: Rig) -> None:
    gpu = only_gpu(rig.read_at(1.0))
    rig.read_at(2.0)

    assert gpu.memory_used_bytes == 30 * GIB + 400 * MIB  # v1 `used` includes the reserve
    assert gpu.memory_free_bytes == 40536 * MIB - 30 * GIB - 400 * MIB
    assert gpu.temperature_c == 67.0
    assert gpu.processes is None  # _v3 missing: NVMLLibraryMismatchError, not an NVMLError
    assert gpu.clock_event_reasons is None
    assert rig.fake.calls["nvmlDeviceGetMemoryInfo"] == 2
    assert rig.fake.calls["nvmlDeviceGetTemperature"] == 2


@scenario("no-nvml")
def test_no_nvml_scenario_reads_as_unavailable_with_a_plain_reason(rig: Rig) -> None:
    reading = rig.read_at(1.0)

    assert not reading.available
    assert reading.gpus == ()
    assert reading.unavailable_reason == (
        "no NVML: libnvidia-ml.so.1 not found: no NVIDIA driver on this machine"
    )


@scenario("no-nvml")
def test_failed_init_is_retried_at_most_once_a_minute(rig: Rig) -> None:
    rig.read_at(0.0)
    rig.read_at(RETRY_INIT_S - 1)
    assert rig.fake.calls["nvmlInitWithFlags"] == 1

    rig.read_at(RETRY_INIT_S + 1)
    assert rig.fake.calls["nvmlInitWithFlags"] == 2


# -- utilization sample draining --------------------------------------------------------------


def _steps(t: float) -> GpuState:
    util = 10 if t < 1 else 50 if t < 2 else 90
    return GpuState(util, 1 * GIB, 300, 50)


@scenario(one_gpu("util-steps", _steps))
def test_utilization_is_mean_and_max_of_only_the_samples_since_the_last_poll(rig: Rig) -> None:
    first = only_gpu(rig.read_at(1.0))  # six samples in (0, 1 s): all 10 %
    second = only_gpu(rig.read_at(3.0))  # six at 50 %, six at 90 %

    assert (first.utilization_pct, first.utilization_max_pct) == (10.0, 10.0)
    assert (second.utilization_pct, second.utilization_max_pct) == (70.0, 90.0)


@scenario(one_gpu("util-steps", _steps))
def test_a_poll_with_no_new_samples_falls_back_to_the_current_rate(rig: Rig) -> None:
    rig.read_at(3.0)
    again = only_gpu(rig.read_at(3.0))  # NOT_FOUND: nothing new since the last timestamp

    assert again.utilization_pct == again.utilization_max_pct == 90.0
    rig.read_at(4.0)
    assert rig.fake.calls["nvmlDeviceGetUtilizationRates"] == 1  # samples were asked again


@scenario("healthy")
def test_the_first_poll_drains_at_most_the_driver_buffer(rig: Rig) -> None:
    rig.read_at(600.0)
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)

    _, samples = pynvml.nvmlDeviceGetSamples(handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)

    assert len(samples) == SAMPLE_BUFFER
    assert [s.timeStamp for s in samples] == sorted({s.timeStamp for s in samples})


# -- errors, processes, memory versions --------------------------------------------------------


@scenario(one_gpu("reset-required", training, errors={"nvmlDeviceGetPowerUsage": RESET_REQUIRED}))
def test_any_other_nvml_error_on_a_gpu_is_a_problem_that_is_not_lost(rig: Rig) -> None:
    reading = rig.read_at(1.0)

    assert reading.gpus == ()
    (problem,) = reading.problems
    assert (problem.index, problem.uuid, problem.lost) == (0, uuid_for(0), False)
    assert problem.error == "nvmlDeviceGetPowerUsage: GPU requires restart"


@scenario(one_gpu("no-permission", training, errors={"nvmlDeviceGetPowerUsage": NO_PERMISSION}))
def test_no_permission_on_one_call_is_an_unknown_metric_not_a_problem(rig: Rig) -> None:
    gpu = only_gpu(rig.read_at(1.0))

    assert gpu.power_w is None
    assert gpu.memory_used_bytes == 60 * GIB


THREE_PROCESSES = GpuState(80, 40 * GIB, 500, 60, ((11, 30 * GIB), (12, None), (13, 0)))


@scenario(one_gpu("three-processes", lambda t: THREE_PROCESSES))
def test_every_process_comes_back_and_unknown_memory_stays_none(rig: Rig) -> None:
    gpu = only_gpu(rig.read_at(1.0))

    assert gpu.processes == (
        GpuProcess(11, 30 * GIB),
        GpuProcess(12, None),
        GpuProcess(13, 0),
    )


@scenario("shared")
def test_each_process_carries_nvmls_name_for_it_asked_once_while_it_runs(rig: Rig) -> None:
    reading = rig.read_at(1.0)
    rig.read_at(2.0)

    [server], [job] = (gpu.processes for gpu in reading.gpus)
    assert (server.pid, server.name) == (NEIGHBOUR_PID, NEIGHBOUR_PROCESS)
    assert (job.pid, job.name) == (HUNG_PID, HUNG_PROCESS)
    assert rig.fake.calls["nvmlSystemGetProcessName"] == 2  # not again on the second poll


@scenario(one_gpu("three-processes-unnamed", lambda t: THREE_PROCESSES))
def test_a_process_the_driver_cannot_name_has_no_name(rig: Rig) -> None:
    gpu = only_gpu(rig.read_at(1.0))

    assert [p.name for p in gpu.processes or ()] == [None, None, None]


@scenario(one_gpu("no-processes", lambda t: GpuState(0, 0, 60, 30)))
def test_no_processes_is_an_empty_tuple_not_none(rig: Rig) -> None:
    assert only_gpu(rig.read_at(1.0)).processes == ()


@scenario(
    Scenario(
        "no-memory-v2", healthy().gpus, missing_symbols=frozenset({"nvmlDeviceGetMemoryInfo_v2"})
    )
)
def test_memory_falls_back_to_v1_when_the_v2_symbol_is_missing(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    versions: list[object] = []
    real = pynvml.nvmlDeviceGetMemoryInfo

    def spy(handle: object, version: object = None) -> object:
        versions.append(version)
        return real(handle, version)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetMemoryInfo", spy)
    gpu = only_gpu(rig.read_at(1.0))
    rig.read_at(2.0)

    assert gpu.memory_used_bytes == 60 * GIB + H100_RESERVED
    assert gpu.memory_free_bytes == H100_TOTAL - 60 * GIB - H100_RESERVED
    assert versions == [pynvml.nvmlMemory_v2, None, None]  # v2 tried once, then v1 only


@scenario(
    Scenario("no-count", healthy().gpus, missing_symbols=frozenset({"nvmlDeviceGetCount_v2"}))
)
def test_a_driver_that_cannot_count_its_gpus_reads_as_unavailable(rig: Rig) -> None:
    reading = rig.read_at(1.0)

    assert not reading.available
    assert reading.unavailable_reason == "NVML cannot count the GPUs: Function Not Found"
    assert reading.driver_version == "570.133.20"


# -- lifecycle -----------------------------------------------------------------------------------


@scenario("healthy")
def test_close_shuts_nvml_down_once(rig: Rig) -> None:
    rig.read_at(1.0)
    assert pynvml._nvmlLib_refcount == 1

    rig.source.close()
    rig.source.close()

    assert rig.fake.calls["nvmlShutdown"] == 1
    assert pynvml._nvmlLib_refcount == 0


@scenario("healthy")
def test_close_before_any_read_does_not_shut_down(rig: Rig) -> None:
    rig.source.close()

    assert rig.fake.calls["nvmlShutdown"] == 0


@scenario("healthy:gpus=2")
def test_concurrent_first_reads_initialise_nvml_once(rig: Rig) -> None:
    readings: list[Reading] = []
    threads = [
        threading.Thread(target=lambda: readings.append(rig.source.read())) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert rig.fake.calls["nvmlInitWithFlags"] == 1
    assert all(len(reading.gpus) == 2 for reading in readings)


# -- no fake at all ------------------------------------------------------------------------------


def _libnvidia_ml_loads() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_libnvidia_ml_loads(), reason="this machine has a real NVIDIA driver")
def test_real_pynvml_without_a_driver_reads_as_no_nvml(clock: FrozenClock) -> None:
    source = NvmlSource(clock)

    reading = source.read()
    source.close()

    assert not reading.available
    assert reading.unavailable_reason == (
        "no NVML: libnvidia-ml.so.1 not found: no NVIDIA driver on this machine"
    )
    assert pynvml.nvmlLib is None


@pytest.mark.skipif(_libnvidia_ml_loads(), reason="this machine has a real NVIDIA driver")
def test_a_driver_that_appears_later_is_picked_up_on_retry(
    clock: FrozenClock, monotonic: ManualMonotonic
) -> None:
    source = NvmlSource(clock)
    assert not source.read().available

    with FakeNvml("healthy", monotonic=monotonic):
        clock.advance(RETRY_INIT_S / 2)
        assert not source.read().available  # too soon to try again
        clock.advance(RETRY_INIT_S / 2)
        reading = source.read()
        source.close()

    assert reading.available
    assert len(reading.gpus) == 1


def test_a_missing_pynvml_package_reads_as_no_nvml(
    clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError

    reading = NvmlSource(clock).read()

    assert not reading.available
    assert reading.unavailable_reason == "no NVML: nvidia-ml-py (module pynvml) is not installed"


def test_a_broken_pynvml_module_reads_as_no_nvml(clock: FrozenClock) -> None:
    class Shadowed:  # another package's `pynvml`: no nvmlInit
        NVMLError = pynvml.NVMLError

    reading = NvmlSource(clock, nvml=Shadowed()).read()

    assert not reading.available
    assert reading.unavailable_reason.startswith("no NVML: nvmlInit failed: AttributeError")


# -- the fake itself -----------------------------------------------------------------------------


def _pynvml_state() -> tuple[object, ...]:
    return (
        pynvml.nvmlLib,
        dict(pynvml._nvmlGetFunctionPointer_cache),
        pynvml._nvmlLib_refcount,
        pynvml.nvmlDeviceGetName,
        pynvml.nvmlDeviceGetUUID,
        pynvml.nvmlSystemGetDriverVersion,
    )


@pytest.mark.parametrize("spec", sorted(SCENARIOS))
def test_the_fake_is_fully_uninstalled_after_the_context_manager(
    spec: str, clock: FrozenClock
) -> None:
    before = _pynvml_state()

    fake = FakeNvml(spec)
    with pytest.raises(RuntimeError, match="boom"), fake:
        assert fake.installed
        NvmlSource(clock).read()
        raise RuntimeError("boom")

    assert not fake.installed
    assert _pynvml_state() == before
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()


def test_a_second_fake_cannot_be_installed_over_the_first() -> None:
    with FakeNvml("healthy"), pytest.raises(RuntimeError, match="already installed"):
        FakeNvml("deadlock").install()


def test_a_symbol_the_fake_lacks_behaves_like_a_missing_driver_symbol() -> None:
    with FakeNvml("healthy"):
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        with pytest.raises(pynvml.NVMLError_FunctionNotFound):
            pynvml.nvmlDeviceGetFanSpeed(handle)
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            pynvml.nvmlDeviceGetHandleByIndex(1)
        pynvml.nvmlShutdown()


def test_scenario_specs_set_knobs_and_reject_unknown_names_and_knobs() -> None:
    assert len(parse_scenario("healthy:gpus=3").gpus) == 3
    assert parse_scenario(" deadlock : train_s = 2 , idle_w=60 ").name == "deadlock"

    with pytest.raises(ValueError, match="unknown fake NVML scenario 'nope'"):
        parse_scenario("nope")
    with pytest.raises(ValueError, match=r"takes train_s=30\.0, idle_w=72\.0"):
        parse_scenario("deadlock:speed=2")
    with pytest.raises(ValueError, match="must be a number"):
        parse_scenario("healthy:gpus=many")
    with pytest.raises(ValueError, match="takes no knobs"):
        parse_scenario("unsupported:x=1")


def test_every_scenario_is_described_with_its_knobs() -> None:
    lines = describe_scenarios()

    assert [line.split(":")[0].split()[0] for line in lines] == list(SCENARIOS)
    assert any(line.startswith("gpu-lost:lost_s=10.0 ") for line in lines)
