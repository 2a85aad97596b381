"""Training health and metric history on a run's own heartbeat, and GPU ownership on a shared
machine, against the real schema."""

from dataclasses import replace
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select

from governor.adapters.telemetry.nvml import NvmlSource
from governor.db import repository as repo
from governor.db.tables import RunMetricRow
from governor.domain.health import HealthRule, Kind, Response
from governor.domain.model import Action, Category, PodState, Reason, Severity
from governor.domain.telemetry import GIB, GpuProcess, ProcessClaim, Reading, hosts, own_part
from governor.fakes.nvml import HUNG_PID, HUNG_PROCESS, FakeNvml, uuid_for
from governor.services.fleet import pods
from governor.services.jobs import checkins
from governor.services.monitoring import metric_history, telemetry
from governor.services.runs import lifecycle
from tests.integration.conftest import Governor, gpu_sample, ok


def health_run(gov: Governor, budget: str, pod: str, *rules: HealthRule) -> str:
    spec = lifecycle.RunSpec("rl", pod, heartbeat_timeout_s=3600, health=rules or None)
    with gov.session() as s:
        row, _ = lifecycle.create(s, gov.ctx.config, budget, spec, gov.clock.now())
        return row.id


def beat(gov: Governor, run: str, step: int, **metrics: object) -> checkins.Directive:
    heartbeat = checkins.Heartbeat(step=step, metrics=metrics)
    return checkins.check_in(gov.ctx.sessions, gov.ctx.config, run, heartbeat, gov.clock.now())


def model_events(gov: Governor, run: str) -> list:
    with gov.session() as s:
        found = repo.events(s, category=Category.MODEL, subject=f"run:{run}")
        return list(reversed(found))


def test_a_reward_collapse_is_warned_then_stopped_with_the_window_of_values(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    flat = HealthRule(Kind.FLATLINE, "reward_variance", Response.STOP, window=8, threshold=1e-9)
    run = health_run(gov, budget, pod, flat)
    actions = []
    for step in range(1, 31):
        gov.clock.advance(10)
        variance = 0.3 + 0.01 * (step % 4) if step <= 8 else 0.0
        directive = beat(gov, run, step, reward_mean=0.5, reward_variance=variance, kl=0.01)
        actions.append(directive.action)
        if directive.action is Action.STOP:
            break
    assert directive.reason is Reason.FLATLINE and directive.deadline is not None
    warned, stopped = (e for e in model_events(gov, run) if "reward_variance" in e.message)
    assert warned.severity is Severity.WARNING and stopped.severity is Severity.CRITICAL
    assert stopped.evidence["values"] == [0.0] * 8
    assert warned.at < stopped.at
    with gov.session() as s:
        order = repo.latest_stop_order(s, pod)
        assert order is not None and order.reason is Reason.FLATLINE
        assert repo.get_pod(s, pod).state is PodState.STOPPING


def test_a_nan_loss_stops_at_once_without_asking_for_a_save(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run = health_run(gov, budget, pod)  # non_finite on loss is on for every run
    assert beat(gov, run, 10, loss=1.5).action is Action.CONTINUE
    gov.clock.advance(5)
    checkins.check_in(
        gov.ctx.sessions,
        gov.ctx.config,
        run,
        checkins.Heartbeat(step=10, checkpoint=checkins.Checkpoint(10, "/ws/ckpt-10")),
        gov.clock.now(),
    )
    gov.clock.advance(5)
    directive = beat(gov, run, 11, loss="NaN")
    assert (directive.action, directive.reason) == (Action.STOP, Reason.NON_FINITE)
    assert "Do not save" in (directive.message or "")
    assert "step 10, /ws/ckpt-10" in (directive.message or "")
    [event] = model_events(gov, run)
    assert event.evidence["rule"] == "non_finite" and event.evidence["values"] == ["NaN"]
    gov.tick(400)  # past the grace: stopped with its workspace kept, no save waited for
    gov.tick(30)
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.STOPPED


def test_a_checkpoint_rule_asks_on_the_beat_itself(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    rule = HealthRule(Kind.DIVERGING, "loss", Response.CHECKPOINT, window=2, factor=2.0)
    run = health_run(gov, budget, pod, rule)
    for step, loss in enumerate((1.0, 0.5, 1.2, 1.3), start=1):
        directive = beat(gov, run, step, loss=loss)
    assert (directive.action, directive.reason) == (Action.CHECKPOINT, Reason.DIVERGING)


def test_metrics_are_kept_as_a_series_and_fold_like_gpu_samples(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run = health_run(gov, budget, pod)
    gov.clock.current = gov.clock.current.replace(second=0)
    for step, loss in ((1, 2.0), (2, 1.0), (3, 3.0)):
        beat(gov, run, step, loss=loss, lr=1e-4, note="warmup", done=True, bad="NaN")
        gov.clock.advance(15)
    with gov.session() as s:
        points = metric_history.series(s, run, "loss", None).items
        assert [(p.step, p.value) for p in points] == [(1, 2.0), (2, 1.0), (3, 3.0)]
        names = set(s.scalars(select(RunMetricRow.name)).all())
        assert names == {"loss", "lr"}  # numbers only: no text, no flag, no NaN
        assert metric_history.series(s, run, None, gov.clock.now()).items == []
        assert repo.get_run(s, run).metrics["loss"] == 3.0  # the latest, as before
    gov.clock.advance(7200)
    with gov.session() as s:
        assert metric_history.fold(s, gov.clock.now(), 3600, 86400) == 6
    with gov.session() as s:
        [loss] = metric_history.series(s, run, "loss", None).items
    assert (loss.resolution, loss.value, loss.least, loss.most, loss.step) == (
        "minute",
        2.0,
        1.0,
        3.0,
        3,
    )
    gov.clock.advance(86400)
    with gov.session() as s:
        metric_history.fold(s, gov.clock.now(), 3600, 86400)
        assert metric_history.series(s, run, None, None).items == []


def shared_machine(gov: Governor, owned: list[str] | None) -> tuple[str, str]:
    budget = gov.budget("1000")
    registration = pods.Registration("fake", "pod-1", gpu_count=1, gpu_uuids=owned, node="box")
    with gov.session() as s:
        pod = pods.register(s, gov.ctx, budget, registration, gov.clock.now()).id
    run = gov.run(budget, pod, timeout_s=3600, grace_s=30)
    return pod, run


def neighbour_busy_hung_job_idle(gov: Governor, pod: str, run: str) -> checkins.Directive:
    """GPU-0 runs another service at 55%; GPU-1 holds the hung job's memory at 0%."""
    directive = gov.beat(run, step=100)
    for _ in range(80):
        gov.clock.advance(10)
        reading = Reading(
            gov.clock.now(),
            gpus=(gpu_sample(util=55, index=0), gpu_sample(util=0, used_gib=19.5, index=1)),
        )
        with gov.session() as s:
            telemetry.ingest_node(s, "box", [reading], gov.clock.now())
        gov.tick()
        directive = gov.beat(run, step=100)
        if directive.action is Action.STOP:
            break
    return directive


def test_a_pod_owning_the_idle_gpu_is_warned_then_stopped(gov: Governor) -> None:
    pod, run = shared_machine(gov, ["GPU-1"])
    directive = neighbour_busy_hung_job_idle(gov, pod, run)
    assert (directive.action, directive.reason) == (Action.STOP, Reason.IDLE_HANG)
    with gov.session() as s:
        warned = [e for e in repo.events(s) if e.message.startswith("The job may be hung")]
        order = repo.latest_stop_order(s, pod)
        assert order is not None
        stop = [e for e in repo.events(s) if e.message.startswith("Stop ordered (idle-hang)")]
        latest = telemetry.latest(s, pod)
        peaks = repo.peaks_of(s, [run])
    assert len(warned) == 1 and warned[0].evidence["gpus"] == ["GPU-1"]
    assert 290 <= (order.created_at - warned[0].at).total_seconds() <= 310
    assert stop and stop[0].evidence["gpus"] == ["GPU-1"]
    assert [sample.uuid for _, sample in latest] == ["GPU-1"]  # each pod gets its own GPUs
    assert [p.gpu_uuid for p in peaks] == ["GPU-1"]


def test_without_ownership_a_busy_neighbour_keeps_the_pod_running(gov: Governor) -> None:
    pod, run = shared_machine(gov, None)
    directive = neighbour_busy_hung_job_idle(gov, pod, run)
    assert directive.reason is not Reason.IDLE_HANG  # today's rule: every GPU must be idle
    with gov.session() as s:
        assert not [e for e in repo.events(s) if e.message.startswith("The job may be hung")]
        assert {sample.uuid for _, sample in telemetry.latest(s, pod)} == {"GPU-0", "GPU-1"}


def test_a_pods_agent_claims_its_gpus_and_the_rest_stay_context(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    with gov.session() as s:
        row = repo.get_pod(s, pod)
        telemetry.claim(s, row, ["GPU-1"], gov.clock.now())
        telemetry.claim(s, row, ["GPU-1"], gov.clock.now())  # the same again: no new event
    gov.report(pod, gpu_sample(util=55, index=0), gpu_sample(util=0, used_gib=19.5, index=1))
    gov.clock.advance(timedelta(seconds=1).total_seconds())
    with gov.session() as s:
        views = telemetry.gpu_views(s, pod, gov.clock.now(), gov.ctx.config.watch)
        stored = {sample.uuid for _, sample in telemetry.latest(s, pod)}
        claimed = [e for e in repo.events(s) if e.message.startswith("The pod's own GPUs")]
    assert [v.uuid for v in views] == ["GPU-1"]
    assert stored == {"GPU-0", "GPU-1"}  # the neighbour's GPU is shown, not judged
    assert len(claimed) == 1


def test_a_pod_naming_its_process_is_judged_by_that_process_alone(gov: Governor) -> None:
    """The fake driver's shared machine, read through NVML: GPU 0 busy with a neighbour's
    inference server, GPU 1 holding the hung job's Python at 0%. A pod that names its
    process (no GPU by UUID) is warned and stopped for idle-hang on GPU 1, and its run's peak
    is its process's memory; one that names none keeps today's rule (GPU 0 is busy)."""
    budget = gov.budget("1000")
    named, unnamed = (
        pods.Registration("fake", ref, node="box", **claim)
        for ref, claim in (("named", {"process_pattern": "python3*"}), ("unnamed", {}))
    )
    with gov.session() as s:
        pod = pods.register(s, gov.ctx, budget, named, gov.clock.now()).id
        other = pods.register(s, gov.ctx, budget, unnamed, gov.clock.now()).id
    run = gov.run(budget, pod, timeout_s=3600, grace_s=30)
    other_run = gov.run(budget, other, timeout_s=3600, grace_s=30)
    elapsed = [0.0]
    with FakeNvml("shared", monotonic=lambda: 1000.0 + elapsed[0]):
        source = NvmlSource(gov.clock)
        for _ in range(40):  # a reading every 30 s: the stop comes after 600 s of idling
            gov.clock.advance(30)
            elapsed[0] += 30
            with gov.session() as s:
                telemetry.ingest_node(s, "box", [source.read()], gov.clock.now())
            gov.tick()
            directive, other_directive = gov.beat(run, step=100), gov.beat(other_run, step=100)
            if directive.action is Action.STOP:
                break
        source.close()

    assert (directive.action, directive.reason) == (Action.STOP, Reason.IDLE_HANG)
    assert other_directive.reason is not Reason.IDLE_HANG
    with gov.session() as s:
        hung = [e for e in repo.events(s) if e.message.startswith("The job may be hung")]
        peaks = {(p.run_id, p.gpu_uuid): p.peak_used_bytes for p in repo.peaks_of(s, [run])}
        other_peaks = {p.gpu_uuid for p in repo.peaks_of(s, [other_run])}
        [(_, hung_gpu)] = [(at, g) for at, g in telemetry.latest(s, pod) if g.uuid == uuid_for(1)]
    assert [e.subject for e in hung] == [f"run:{run}"]  # the named pod's run alone
    assert hung[0].evidence["gpus"] == [uuid_for(1)]
    assert peaks == {(run, uuid_for(1)): int(19.5 * GIB)}  # the job's process, not the server
    assert other_peaks == {uuid_for(0), uuid_for(1)}  # every GPU, as before
    assert hung_gpu.processes == (GpuProcess(HUNG_PID, int(19.5 * GIB), HUNG_PROCESS),)


def test_a_process_claim_matches_by_pid_or_a_glob_of_the_name_or_its_last_part() -> None:
    job = GpuProcess(4101, GIB, "/usr/bin/python3.11")
    server = GpuProcess(5200, GIB, "/opt/serving/bin/inference-server")
    unnamed = GpuProcess(7000, GIB)
    assert ProcessClaim.of(None, None) is None and ProcessClaim.of([], "") is None
    by_name = ProcessClaim.of(None, "python3*")
    assert by_name is not None and by_name.claims(job) and not by_name.claims(server)
    assert not by_name.claims(unnamed)
    whole = ProcessClaim.of(None, "/opt/*")
    assert whole is not None and whole.claims(server) and not whole.claims(job)
    by_pid = ProcessClaim.of([7000], None)
    assert by_pid is not None and by_pid.claims(unnamed) and not by_pid.claims(job)
    sample = gpu_sample(util=0, used_gib=2.0)
    shared = replace(sample, processes=(job, server))
    mine = own_part(shared, by_name)
    assert hosts(shared, by_name) and mine.memory_used_bytes == GIB
    assert not hosts(shared, by_pid) and own_part(shared, by_pid).memory_used_bytes == 0
    unknown = replace(shared, processes=(replace(job, used_memory_bytes=None), server))
    assert own_part(unknown, by_name) == unknown  # what it holds is unknown: the GPU's whole
    assert hosts(replace(sample, processes=None), by_pid)  # no process list: as before


def test_a_pod_names_its_processes_at_registration_or_through_its_agent(
    client: TestClient, gov: Governor
) -> None:
    budget = ok(client.post("/v1/budgets", json={"name": "shared", "ceiling_usd": "1000"}), 201)
    pods_path = f"/v1/budgets/{budget['id']}/pods"
    body = {"provider": "fake", "provider_ref": "p-1", "process_pids": [HUNG_PID]}
    registered = ok(client.post(pods_path, json={**body, "process_pattern": "python3*"}), 201)
    assert (registered["process_pids"], registered["process_pattern"]) == ([HUNG_PID], "python3*")
    for wrong in ({"process_pids": [-1]}, {"process_pids": []}, {"process_pattern": " "}):
        refused = client.post(pods_path, json={**body, "provider_ref": "p-2", **wrong})
        assert refused.status_code == 422, (wrong, refused.text)

    pod = ok(client.post(pods_path, json={"provider": "fake", "provider_ref": "p-3"}), 201)
    assert (pod["process_pids"], pod["process_pattern"]) == (None, None)
    token = ok(client.post("/v1/tokens", json={"role": "agent", "pod_id": pod["id"]}), 201)
    job = {"pid": HUNG_PID, "used_memory_bytes": GIB, "name": HUNG_PROCESS}
    reading = {
        "at": gov.clock.now().isoformat(),
        "gpus": [{"uuid": uuid_for(1), "index": 1, "processes": [job]}],
    }
    batch = {"readings": [reading], "process_pattern": "python3*"}
    agent = {"Authorization": f"Bearer {token['token']}"}
    for _ in range(2):  # every batch names them; only a change is an event
        ok(client.post(f"/v1/pods/{pod['id']}/telemetry", json=batch, headers=agent), 202)
    pod = ok(client.get(f"/v1/pods/{pod['id']}"))
    assert (pod["process_pids"], pod["process_pattern"]) == (None, "python3*")
    assert pod["telemetry"]["gpus"][0]["processes"] == [job]
    with gov.session() as s:
        claimed = [e for e in repo.events(s) if e.message.startswith("The pod's own processes")]
    assert [e.message for e in claimed] == [
        "The pod's own processes are now those named python3*: the GPU rules judge the memory "
        "they hold."
    ]
