"""Real trainers against the real server: at the ceiling a transformers Trainer and a Lightning
Trainer save a checkpoint, acknowledge the stop with it, and stop; the pod is then stopped. A
transformers Trainer whose loss goes NaN is stopped by the governor without saving. A first
step that compiles is judged against the compile allowance, not the stall window, and its idle
GPU (a fake NVML at 0 % holding memory) not against the idle window once it trains.

Tiny randomly initialised models on CPU, random data, nothing downloaded. A fake pod bills a
dollar a second; with a $15.00 ceiling and a 10 s grace the stop comes about 4.4 s in (the
grace is long so that a loaded machine still saves before the deadline).
SQLite only: these tests are about the trainers, not the server's database.
"""

from __future__ import annotations

import math
import os
import time
from datetime import datetime

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers reads it: nothing here may download

from pathlib import Path
from typing import Any

import httpx
import pytest
import pytorch_lightning as pl
import torch
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session
from torch.utils.data import DataLoader, Dataset, TensorDataset
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

from governor.client.hf import GovernorCallback
from governor.client.lightning import GovernorLightningCallback
from governor.db.tables import RunPhaseRow
from tests.e2e.conftest import (
    AgentFactory,
    GovernorServer,
    agent_token,
    budget_events,
    create_run,
    declare_budget,
    gpu_samples,
    idle_from,
    is_idle,
    ok,
    register_pod,
    wait_for,
    wait_pod_stopped,
)

pytestmark = pytest.mark.e2e

CEILING_USD = "15.00"
GRACE_S = 10
NEVER = 1_000_000  # max_steps: only the governor ends these runs


@pytest.fixture
def database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('db') / 'governor.db'}"


def start_run(operator: httpx.Client, monkeypatch: pytest.MonkeyPatch, url: str) -> dict:
    """A budget, a pod and a run; the job's settings in the environment, as a launcher sets them.

    Torch's one-time cost is paid before the pod bills: the first optimizer in a process
    imports torch._dynamo, which takes seconds on a loaded machine.
    """
    torch.optim.SGD([torch.zeros(1, requires_grad=True)])
    budget = declare_budget(operator, CEILING_USD)
    pod = register_pod(operator, budget["id"])
    run = create_run(operator, budget["id"], pod["id"], checkpoint_grace_s=GRACE_S)
    monkeypatch.setenv("GOVERNOR_URL", url)
    monkeypatch.setenv("GOVERNOR_RUN_ID", run["id"])
    monkeypatch.setenv("GOVERNOR_JOB_TOKEN", run["token"])
    return run


def acknowledged_stop(operator: httpx.Client, run: dict) -> dict[str, Any]:
    """The pod stopped at the ceiling after the job acknowledged; returns the acked checkpoint."""
    order = wait_pod_stopped(operator, run["pod_id"])["stop_order"]
    assert order["reason"] == "ceiling"
    assert order["acked_at"] is not None, "the stop went out without the job's acknowledgement"
    run_now = ok(operator.get(f"/v1/runs/{run['id']}"))
    assert run_now["status"] == "stopped"
    assert run_now["checkpoint"]["path"] == order["ack_checkpoint"]["path"]
    checkpoint: dict[str, Any] = order["ack_checkpoint"]
    return checkpoint


def phases_of(server: GovernorServer, run_id: str) -> list[str]:
    """The phases the job reported, in order, as the server recorded them."""
    return [phase for phase, _ in phases_with_times(server, run_id)]


def phases_with_times(server: GovernorServer, run_id: str) -> list[tuple[str, datetime]]:
    """The phases the job reported, in order, each with when the server took it."""
    engine = create_engine(server.database_url)
    try:
        with Session(engine) as session:
            rows = session.execute(
                select(RunPhaseRow.phase, RunPhaseRow.at)
                .where(RunPhaseRow.run_id == run_id)
                .order_by(RunPhaseRow.id)
            )
            return [(phase.value, at) for phase, at in rows]
    finally:
        engine.dispose()


class RandomTokens(Dataset[dict[str, torch.Tensor]]):
    def __init__(self, vocab_size: int, length: int = 16, size: int = 64) -> None:
        self.ids = torch.randint(0, vocab_size, (size, length))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


def test_a_transformers_trainer_saves_acknowledges_and_stops_at_the_ceiling(
    server: GovernorServer,
    operator: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    config = GPT2Config(
        vocab_size=64,
        n_positions=16,
        n_embd=16,
        n_layer=2,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = GPT2LMHeadModel(config)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=NEVER,
        per_device_train_batch_size=4,
        save_strategy="no",
        logging_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    run = start_run(operator, monkeypatch, server.url)

    gov = GovernorCallback.from_env()
    trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(64), callbacks=[gov])
    with gov.guard():
        trainer.train()

    assert trainer.state.global_step < NEVER
    # Loading until training begins, compiling until the first optimizer step has finished.
    assert phases_of(server, run["id"])[:3] == ["loading", "compiling", "training"]
    checkpoint = acknowledged_stop(operator, run)
    assert checkpoint["step"] == trainer.state.global_step
    assert checkpoint["path"] == str(tmp_path / f"checkpoint-{trainer.state.global_step}")
    reloaded = GPT2LMHeadModel.from_pretrained(checkpoint["path"])
    for name, weight in model.state_dict().items():
        assert torch.equal(reloaded.state_dict()[name], weight), name


NAN_AFTER = 3  # the step whose update leaves the weights NaN
SAVE_STEPS = 2  # checkpoint-2 is the last good one; the Trainer would save at 4, 6, ... too
NAN_MAX_STEPS = 3000  # a bound, should the governor never stop it; it stops within a few


class BlowUp(TrainerCallback):
    """Leaves the embedding NaN after step NAN_AFTER, as a diverged update does."""

    def on_step_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: torch.nn.Module | None = None,
        **_: Any,
    ) -> None:
        if state.global_step == NAN_AFTER and isinstance(model, GPT2LMHeadModel):
            with torch.no_grad():
                model.transformer.wte.weight.fill_(math.nan)


def test_a_transformers_trainer_whose_loss_goes_nan_is_stopped_without_saving(
    server: GovernorServer,
    operator: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=NAN_MAX_STEPS,
        per_device_train_batch_size=4,
        save_strategy="steps",
        save_steps=SAVE_STEPS,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    assert args.logging_nan_inf_filter  # the default: the Trainer's logs never show the NaN
    torch.optim.SGD([torch.zeros(1, requires_grad=True)])  # torch's one-time cost, paid first
    budget = declare_budget(operator, "1000000.00")  # days away: not the reason for the stop
    pod = register_pod(operator, budget["id"])
    run = create_run(operator, budget["id"], pod["id"], heartbeat_timeout_s=30)
    monkeypatch.setenv("GOVERNOR_URL", server.url)
    monkeypatch.setenv("GOVERNOR_RUN_ID", run["id"])
    monkeypatch.setenv("GOVERNOR_JOB_TOKEN", run["token"])

    gov = GovernorCallback.from_env()
    model = GPT2LMHeadModel(config)
    trainer = Trainer(
        model=model, args=args, train_dataset=RandomTokens(64), callbacks=[BlowUp(), gov]
    )
    with gov.guard():
        trainer.train()

    assert NAN_AFTER < trainer.state.global_step < NAN_MAX_STEPS, "the governor did not stop it"
    # The Trainer saved the good weights at step 2 and nothing after the loss went NaN.
    last_good = str(tmp_path / f"checkpoint-{SAVE_STEPS}")
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == [f"checkpoint-{SAVE_STEPS}"]
    order = wait_pod_stopped(operator, pod["id"])["stop_order"]
    assert order["reason"] == "non-finite"
    assert order["acked_at"] is not None and order["ack_checkpoint"] is None
    run_now = ok(operator.get(f"/v1/runs/{run['id']}"))
    assert run_now["status"] == "stopped"
    assert (run_now["checkpoint"]["step"], run_now["checkpoint"]["path"]) == (SAVE_STEPS, last_good)
    events = budget_events(operator, budget["id"])
    [event] = [e for e in events if e["evidence"].get("rule") == "non_finite"]
    assert event["severity"] == "critical" and event["evidence"]["metric"] == "loss"
    assert event["evidence"]["step"] > NAN_AFTER
    assert f"the last good checkpoint is step {SAVE_STEPS}, {last_good}" in event["message"]


COMPILE_S = 10.0  # the first forward's stand-in for compilation: past the stall window
# The defaults are 900 and 1800. The stall window counts from the run's creation, so the job's
# first check-in (phase `loading`) must come within it: 8 s leaves a busy machine room.
SLOW_START = {"stall_window_s": 8, "compile_allowance_s": 30}


class SlowFirstStep(GPT2LMHeadModel):
    """A model whose first forward takes `compile_s`, as a compiled model's first step does."""

    compile_s = COMPILE_S

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if not getattr(self, "_compiled", False):
            self._compiled = True
            time.sleep(self.compile_s)
        return super().forward(*args, **kwargs)


def test_a_slow_first_step_is_compilation_not_a_stall(
    server: GovernorServer,
    operator: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=10,
        per_device_train_batch_size=4,
        remove_unused_columns=False,  # the slow forward takes **kwargs
        save_strategy="no",
        logging_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    torch.optim.SGD([torch.zeros(1, requires_grad=True)])  # torch's one-time cost, paid first
    budget = declare_budget(operator, "1000.00")
    pod = register_pod(operator, budget["id"])
    run = create_run(operator, budget["id"], pod["id"], heartbeat_timeout_s=60, policy=SLOW_START)
    monkeypatch.setenv("GOVERNOR_URL", server.url)
    monkeypatch.setenv("GOVERNOR_RUN_ID", run["id"])
    monkeypatch.setenv("GOVERNOR_JOB_TOKEN", run["token"])

    gov = GovernorCallback.from_env()
    model = SlowFirstStep(config)
    trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(64), callbacks=[gov])
    with gov.guard():
        trainer.train()

    assert trainer.state.global_step == 10, "the governor stopped a compiling job"
    assert ok(operator.get(f"/v1/pods/{pod['id']}"))["stop_order"] is None
    assert ok(operator.get(f"/v1/runs/{run['id']}"))["status"] == "finished"
    assert phases_of(server, run["id"])[:3] == ["loading", "compiling", "training"]
    # It was quiet past the stall window: warned, not stopped, as compilation is allowed.
    warned = [
        e for e in budget_events(operator, budget["id"]) if e["evidence"].get("rule") == "stalled"
    ]
    assert {e["severity"] for e in warned} == {"warning"}, warned
    # The warning names the phase the job had reported by then: loading or compiling, or none
    # yet when its first check-in came later than half the window (a busy machine).
    assert warned[0]["evidence"]["phase"] in (None, "loading", "compiling")


IDLE_WINDOW_S = 6.0
IDLE_COMPILE_S = 9.0  # the first step's compile, the GPU idle while holding memory: past the window
TRAIN_FOR_S = 1.5  # then training, well inside a fresh window, through many passes (0.1 s apart)
IDLE_START = {"idle_window_s": IDLE_WINDOW_S, "stall_window_s": 60, "compile_allowance_s": 120}


class LongCompile(SlowFirstStep):
    compile_s = IDLE_COMPILE_S


class TrainFor(TrainerCallback):
    """Ends training TRAIN_FOR_S after its first step, the compiling one, has finished."""

    def __init__(self) -> None:
        self.first_step_at: float | None = None
        self.ended = False

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        now = time.monotonic()
        if self.first_step_at is None:
            self.first_step_at = now
        elif now - self.first_step_at >= TRAIN_FOR_S:
            control.should_training_stop = self.ended = True


def test_a_compile_longer_than_the_idle_window_is_not_an_idle_hang_once_it_trains(
    server: GovernorServer,
    operator: httpx.Client,
    spawn_agent: AgentFactory,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The fake GPU sits at 0 % holding 3 GiB all along: through loading, a first step that
    compiles for longer than the idle window, and training (the model trains on the CPU). The
    idle rule counts from the start of each phase, so the compile's idle seconds do not carry
    into training: the run trains on and ends by itself."""
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=NEVER,
        per_device_train_batch_size=4,
        remove_unused_columns=False,  # the slow forward takes **kwargs
        save_strategy="no",
        logging_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    torch.optim.SGD([torch.zeros(1, requires_grad=True)])  # torch's one-time cost, paid first
    budget = declare_budget(operator, "1000.00")
    pod = register_pod(operator, budget["id"])
    run = create_run(operator, budget["id"], pod["id"], heartbeat_timeout_s=60, policy=IDLE_START)
    monkeypatch.setenv("GOVERNOR_URL", server.url)
    monkeypatch.setenv("GOVERNOR_RUN_ID", run["id"])
    monkeypatch.setenv("GOVERNOR_TOKEN", run["token"])

    gov = GovernorCallback.from_env()
    wait_for(lambda: phases_of(server, run["id"]) == ["loading"], "the job's first heartbeat")
    token = agent_token(operator, pod["id"])
    spawn_agent(server.url, pod["id"], token, interval_s=0.3, fake_nvml="compile-stall")
    wait_for(lambda: gpu_samples(server.database_url, pod["id"]), "the agent's first reading")
    train_for = TrainFor()
    trainer = Trainer(
        model=LongCompile(config),
        args=args,
        train_dataset=RandomTokens(64),
        callbacks=[train_for, gov],
    )
    with gov.guard():
        trainer.train()

    assert train_for.ended, "the governor stopped the run before it ended by itself"
    assert ok(operator.get(f"/v1/pods/{pod['id']}"))["stop_order"] is None
    assert ok(operator.get(f"/v1/runs/{run['id']}"))["status"] == "finished"
    phases = phases_with_times(server, run["id"])
    assert [phase for phase, _ in phases][:3] == ["loading", "compiling", "training"]
    training_at = phases[2][1]
    # When training began, the GPU had been idle while holding memory for longer than the window.
    samples = gpu_samples(server.database_url, pod["id"])
    idle_for = (training_at - idle_from(samples, training_at)).total_seconds()
    assert idle_for >= IDLE_WINDOW_S, f"idle only {idle_for:.1f} s before training"
    assert is_idle(samples[-1]) and idle_from(samples, samples[-1].at) < training_at
    # While it compiled the idle rule warned, promising no stop of its own; it stopped nothing.
    idle = [
        e for e in budget_events(operator, budget["id"]) if e["evidence"].get("rule") == "idle_hang"
    ]
    assert {e["severity"] for e in idle} == {"warning"}, idle
    [compiling] = [e for e in idle if e["evidence"].get("phase") == "compiling"]
    assert "does not stop a job while it is compiling" in compiling["message"]
    assert "stopped if this lasts" not in compiling["message"]


class TinyModule(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        inputs, targets = batch
        return torch.nn.functional.mse_loss(self.layer(inputs), targets)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


# pytorch-lightning 2.6 builds torch's deprecated LeafSpec (torch 2.13 warns); not our code.
@pytest.mark.filterwarnings(r"ignore:`isinstance\(treespec, LeafSpec\)`:FutureWarning")
def test_a_lightning_trainer_saves_acknowledges_and_stops_at_the_ceiling(
    server: GovernorServer,
    operator: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    data = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=8)
    trainer = pl.Trainer(
        max_steps=NEVER,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    run = start_run(operator, monkeypatch, server.url)

    gov = GovernorLightningCallback.from_env()
    trainer.callbacks.append(gov)
    with gov.guard():
        trainer.fit(TinyModule(), data)

    assert trainer.global_step < NEVER
    assert phases_of(server, run["id"])[:3] == ["loading", "compiling", "training"]
    checkpoint = acknowledged_stop(operator, run)
    assert checkpoint["step"] == trainer.global_step
    assert checkpoint["path"] == str(tmp_path / f"governor-step={trainer.global_step}.ckpt")
    reloaded = TinyModule.load_from_checkpoint(checkpoint["path"])
    assert torch.equal(reloaded.layer.weight, trainer.lightning_module.layer.weight)
