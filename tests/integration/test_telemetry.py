"""GPU telemetry inside the process: storage, peaks, folding, and the rules acting on it."""

from datetime import timedelta

from sqlalchemy import select

from governor.db import repository as repo
from governor.db.tables import GpuSampleRow
from governor.domain.model import Action, Category, Phase, PodState, Reason, Severity
from governor.domain.policy import Watch
from governor.domain.telemetry import GIB, DeviceProblem, GpuProcess, Reading
from governor.services.monitoring import telemetry
from tests.integration.conftest import Governor, gpu_sample


def event_messages(gov: Governor, category: Category = Category.TELEMETRY) -> list[str]:
    with gov.session() as s:
        return [e.message for e in reversed(repo.events(s, category=category))]


def test_samples_are_stored_and_the_peak_per_run_is_kept(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run = gov.run(budget, pod)
    for used in (40, 72.5, 61):
        gov.report(pod, gpu_sample(used_gib=used))
        gov.clock.advance(1)
    with gov.session() as s:
        [peak] = repo.peaks_of(s, [run])
        latest = telemetry.latest(s, pod)
    assert peak.peak_used_bytes == int(72.5 * GIB)
    assert peak.at == gov.clock.now() - timedelta(seconds=2)
    assert [sample.memory_used_bytes for _, sample in latest] == [61 * GIB]
    assert latest[0][1].processes == (GpuProcess(4100, 61 * GIB),)


def test_a_lost_gpu_is_reported_once_and_its_return_too(gov: Governor) -> None:
    pod = gov.pod(gov.budget())
    lost = DeviceProblem(1, "GPU-1", "nvmlDeviceGetHandleByIndex: GPU is lost", lost=True)
    for _ in range(3):
        gov.report(pod, gpu_sample(), problems=(lost,))
    with gov.session() as s:
        assert repo.get_pod(s, pod).lost_gpus == ["GPU-1"]
    gov.report(pod, gpu_sample(), gpu_sample(index=1))
    messages = event_messages(gov)
    assert [m for m in messages if "is lost" in m] == [
        "GPU 1 (GPU-1) is lost: nvmlDeviceGetHandleByIndex: GPU is lost. "
        "The other GPUs are still watched."
    ]
    assert messages[-1] == "GPU GPU-1 answers again."
    with gov.session() as s:
        assert repo.get_pod(s, pod).lost_gpus == []


def test_no_nvml_is_noted_once(gov: Governor) -> None:
    pod = gov.pod(gov.budget())
    for _ in range(3):
        gov.report(pod, available=False)
    with gov.session() as s:
        assert repo.get_pod(s, pod).telemetry_note == "no NVML: libnvidia-ml.so.1 not found"
        [event] = repo.events(s, category=Category.TELEMETRY)
    assert event.severity is Severity.WARNING
    gov.report(pod, gpu_sample())
    assert event_messages(gov)[-1] == "GPU telemetry is available again."


def test_a_reading_from_the_future_is_stored_as_now(gov: Governor) -> None:
    pod = gov.pod(gov.budget())
    ahead = Reading(gov.clock.now() + timedelta(hours=1), gpus=(gpu_sample(),))
    with gov.session() as s:
        telemetry.ingest(s, repo.get_pod(s, pod), [ahead], gov.clock.now())
        assert s.scalar(select(GpuSampleRow.at)) == gov.clock.now()


def test_old_samples_fold_into_minutes_and_expire(gov: Governor) -> None:
    pod = gov.pod(gov.budget())
    gov.clock.current = gov.clock.current.replace(second=0)
    for util in (10.0, 20.0, 90.0):  # three polls within one minute
        gov.report(pod, gpu_sample(util=util, used_gib=util / 2))
        gov.clock.advance(15)
    gov.clock.advance(7200)
    with gov.session() as s:
        assert telemetry.fold(s, gov.clock.now(), raw_keep_s=3600, minute_keep_s=86400) == 3
    with gov.session() as s:
        [row] = s.scalars(select(GpuSampleRow)).all()
    assert row.resolution == "minute"
    assert row.utilization_pct == 40.0  # the mean
    assert row.utilization_max_pct == 90.0  # the busiest
    assert row.memory_used_bytes == 45 * GIB  # the most held
    gov.clock.advance(86400)
    with gov.session() as s:
        telemetry.fold(s, gov.clock.now(), raw_keep_s=3600, minute_keep_s=86400)
        assert s.scalars(select(GpuSampleRow)).all() == []


def test_gpu_views_say_since_when_each_gpu_is_idle(gov: Governor) -> None:
    pod = gov.pod(gov.budget())
    gov.report(pod, gpu_sample(util=95), gpu_sample(util=0, used_gib=19.5, index=1))
    gov.clock.advance(10)
    idle_from = gov.clock.now()
    for _ in range(3):
        gov.report(
            pod, gpu_sample(util=0, used_gib=19.5), gpu_sample(util=0, used_gib=19.5, index=1)
        )
        gov.clock.advance(10)
    with gov.session() as s:
        views = telemetry.gpu_views(s, pod, gov.clock.now(), Watch())
    assert [(v.uuid, v.idle_since, v.fresh) for v in views] == [
        ("GPU-0", idle_from, True),
        ("GPU-1", idle_from - timedelta(seconds=10), True),
    ]
    assert views[0].held_bytes == int(19.5 * GIB)
    gov.clock.advance(600)
    with gov.session() as s:
        assert not any(v.fresh for v in telemetry.gpu_views(s, pod, gov.clock.now(), Watch()))


def test_a_deadlocked_job_is_warned_then_stopped_with_its_workspace(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run = gov.run(budget, pod, timeout_s=3600, grace_s=30)
    gov.report(pod, gpu_sample())
    gov.beat(run, step=100)
    for _ in range(80):  # 10 s polls: training is over, the merge deadlocked
        gov.clock.advance(10)
        gov.report(pod, gpu_sample(util=0, used_gib=19.5))
        gov.beat(run, step=100)
        gov.tick()  # the enforcement pass
        directive = gov.beat(run, step=100)
        if directive.action is Action.STOP:
            break
    assert (directive.action, directive.reason) == (Action.STOP, Reason.IDLE_HANG)
    with gov.session() as s:
        order = repo.latest_stop_order(s, pod)
        warned = [e for e in repo.events(s) if e.message.startswith("The job may be hung")]
    assert order is not None and order.reason is Reason.IDLE_HANG
    assert len(warned) == 1
    idle_for = (order.created_at - warned[0].at).total_seconds()
    assert 290 <= idle_for <= 310  # warned at half the 600 s window, stopped at the window
    gov.tick(30)  # the grace
    gov.tick(30)  # the fake cloud's stop latency
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.STOPPED


def test_a_node_agents_reading_goes_to_every_pod_still_running_on_that_node(gov: Governor) -> None:
    budget = gov.budget(ceiling="1000")
    first = gov.pod(budget, "a", node="gpu-node-7")
    second = gov.pod(budget, "b", node="gpu-node-7")
    stopped = gov.pod(budget, "c", node="gpu-node-7")
    elsewhere = gov.pod(budget, "d", node="gpu-node-8")
    with gov.session() as s:
        repo.get_pod(s, stopped).state = PodState.STOPPED
    reading = Reading(gov.clock.now(), gpus=(gpu_sample(index=0), gpu_sample(index=1)))
    with gov.session() as s:
        counts = telemetry.ingest_node(s, "gpu-node-7", [reading], gov.clock.now())
    assert counts == {first: 2, second: 2}
    with gov.session() as s:
        held = s.scalars(select(GpuSampleRow.pod_id).distinct()).all()
    assert sorted(held) == sorted([first, second])
    assert elsewhere not in held


def test_the_idle_seconds_of_a_compile_do_not_carry_into_training(gov: Governor) -> None:
    """The GPU idles holding memory through a 700 s compile (the idle window is 600 s) and on
    into training: the idle rule warns while compiling without promising a stop, and counts
    training's idle seconds from its start."""
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run = gov.run(budget, pod, timeout_s=3600, grace_s=30)
    gov.beat(run, step=0, phase=Phase.COMPILING)

    def idle(seconds: int, step: int) -> Action:
        """10 s polls of an idle GPU holding 3 GiB, a beat and a pass after each."""
        for _ in range(seconds // 10):
            gov.clock.advance(10)
            gov.report(pod, gpu_sample(util=0, used_gib=3))
            gov.beat(run, step=step)
            gov.tick()
        return gov.beat(run, step=step).action

    def idle_events() -> list[str]:
        with gov.session() as s:
            events = reversed(repo.events(s, limit=1000))
            return [e.message for e in events if "every GPU below" in e.message]

    assert idle(700, step=0) is Action.CONTINUE
    [compiling] = idle_events()
    assert compiling.startswith("The GPUs sit idle while the job is compiling")
    assert "does not stop a job while it is compiling" in compiling
    gov.beat(run, step=1, phase=Phase.TRAINING)  # the first step has compiled
    training_at = gov.clock.now()
    assert idle(290, step=1) is Action.CONTINUE
    assert len(idle_events()) == 1
    assert idle(10, step=1) is Action.CONTINUE
    assert idle_events()[1].startswith("The job may be hung: every GPU below 5% for 300 s")
    assert idle(300, step=1) is Action.STOP
    with gov.session() as s:
        order = repo.latest_stop_order(s, pod)
    assert order is not None and order.reason is Reason.IDLE_HANG
    assert (order.created_at - training_at).total_seconds() == 600
