"""The dashboard in a real headless Chromium against the real server, and its JSON twin.

Chromium is Debian's (`make test` installs it), driven by Playwright for Python; Playwright
never downloads a browser here. Without Chromium these tests fail, they never skip.
One server per database serves every test in this module; each test declares its own budget
(the first runs on a server with no other budgets; the last stops the server and starts it
again). Screenshots go to the test's tmp dir and to test-artifacts/screenshots/ in the
repository root.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from governor.domain.money import dollars
from governor.fakes.nvml import uuid_for
from tests.conftest import reset_postgres
from tests.e2e.conftest import (
    GovernorServer,
    SimulatedJob,
    agent_token,
    assert_error,
    declare_budget,
    fresh,
    get_pod,
    is_postgres,
    migrate,
    ok,
    register_pod,
    submit,
    wait_for,
    wait_pod_stopped,
)
from tests.programs import program

pytestmark = pytest.mark.e2e

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
LAPTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
EXPECT_MS = 20_000
REFRESH_MS = 5_000  # the page refreshes itself this often
SERVER_ENV = {
    "GOVERNOR_FAKE_NVML": "healthy:gpus=2",  # local pods get two scripted H100s
    "GOVERNOR_TELEMETRY_INTERVAL_S": "0.5",
}


# --- fixtures: one server per database, one browser per module -------------------------------


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ],
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GovernorServer]:
    workdir = tmp_path_factory.mktemp("dashboard")
    url = reset_postgres() if request.param == "postgres" else f"sqlite:///{workdir / 'gov.db'}"
    governor = GovernorServer(workdir, url, dict(SERVER_ENV))
    if is_postgres(url):
        migrate(url, workdir)
    try:
        yield governor.start().wait_ready()
    finally:
        governor.close()


@pytest.fixture
def operator(server: GovernorServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium under Playwright. Missing Chromium or Playwright fails the test."""
    chromium_path = program("chromium")  # the dashboard tests need a real browser
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright for Python is missing: pip install -e '.[dev]'")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def new_page(browser: Any, server: GovernorServer, viewport: dict[str, int] = LAPTOP) -> Any:
    context = browser.new_context(base_url=server.url, viewport=viewport)
    context.set_default_timeout(EXPECT_MS)
    return context.new_page()


def sign_in(page: Any, token: str) -> None:
    page.goto("/status")
    assert page.url.endswith("/login"), page.url  # no session yet: sent to the sign-in form
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/status"))


def shoot(page: Any, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot under the test's tmp dir, copied to test-artifacts/screenshots/."""
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, ARTIFACTS / name)
    return path


# --- helpers over the API --------------------------------------------------------------------


def viewer_token(operator: httpx.Client) -> str:
    return new_token(operator, "viewer", "dashboard test")["token"]


def new_token(operator: httpx.Client, role: str, label: str) -> dict[str, str]:
    made: dict[str, str] = ok(operator.post("/v1/tokens", json={"role": role, "label": label}), 201)
    return made


def request_extension(client: httpx.Client, budget_id: str, amount: str, reason: str) -> str:
    body = {"amount_usd": amount, "reason": reason}
    extension_id: str = ok(client.post(f"/v1/budgets/{budget_id}/extensions", json=body), 201)["id"]
    return extension_id


def extension_state(operator: httpx.Client, budget_id: str, extension_id: str) -> str:
    found = ok_list(operator.get("/v1/extensions", params={"budget_id": budget_id}))
    [extension] = [e for e in found if e["id"] == extension_id]
    state: str = extension["state"]
    return state


def ok_list(response: httpx.Response) -> list[dict[str, Any]]:
    """The items of a list's first page."""
    assert response.status_code == 200, response.text[:500]
    body: list[dict[str, Any]] = response.json()["items"]
    return body


def spending_budget(server: GovernorServer, operator: httpx.Client, name: str) -> dict[str, Any]:
    """A $8 budget whose local fake pod ($1/s) runs a training job into the ceiling."""
    budget = declare_budget(operator, "8.00", name=name)
    pod = register_pod(operator, budget["id"], f"{name}-pod", local=True)
    run_body = {
        "name": "lora-finetune",
        "pod_id": pod["id"],
        "total_steps": 400,
        "heartbeat_timeout_s": 5,
        "checkpoint_grace_s": 1,
    }
    run = ok(operator.post(f"/v1/budgets/{budget['id']}/runs", json=run_body), 201)
    with server.client(run["token"]) as job_client:  # while its run lives: pending, no delay
        extension = request_extension(
            job_client, budget["id"], "10", "40 more steps to finish the epoch"
        )
    with SimulatedJob(server.url, run, on_stop="ack", phase="training") as job:
        job.join()
        wait_pod_stopped(operator, pod["id"])
    return {"budget": budget, "pod": pod, "run": run, "extension": extension}


# --- the page in a browser -------------------------------------------------------------------


def on_first_screen(page: Any, locator: Any, viewport: dict[str, int]) -> None:
    """The element is laid out inside the viewport as the page opens, without scrolling."""
    assert page.evaluate("window.scrollY") == 0
    in_view(locator, viewport)


def in_view(locator: Any, viewport: dict[str, int]) -> None:
    """The element lies wholly inside the viewport where the page is scrolled now."""
    box = locator.bounding_box()
    assert box is not None, "not laid out"
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], box
    assert box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"], box


def test_the_most_urgent_budget_leads_the_first_screen_on_a_laptop_and_a_phone(
    server: GovernorServer, operator: httpx.Client, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    calm = declare_budget(operator, "1000000", name="llama-calm")  # declared first: once shown
    register_pod(operator, calm["id"], "calm-pod")  # first, in creation order
    declare_budget(operator, "500", name="eval-idle")  # nothing burns
    urgent = declare_budget(operator, "300", name="h100-urgent")  # $1/s: minutes from a stop
    register_pod(operator, urgent["id"], "h100-sft")
    token = viewer_token(operator)
    for viewport, shot in ((LAPTOP, "dashboard-urgent.png"), (PHONE, "dashboard-urgent-phone.png")):
        page = new_page(browser, server, viewport)
        page.clock.install()
        sign_in(page, token)
        rows = page.locator(".summary-table tbody tr")
        expect(rows).to_have_count(3)
        first = rows.first
        expect(first).to_have_attribute("data-budget-id", urgent["id"])
        expect(first).to_contain_text("h100-urgent")
        expect(first.locator("[data-field=next]")).to_contain_text(
            re.compile(r"stops h100-sft in \d+ min unless extended")
        )
        expect(rows.nth(2).locator("[data-field=next]")).to_have_text("nothing: not burning")
        expect(page.locator("section.budget").first).to_have_attribute(
            "data-budget-id", urgent["id"]
        )  # the cards follow in the same order
        on_first_screen(page, first, viewport)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= viewport["width"], f"the page scrolls sideways ({width} px)"
        shoot(page, tmp_path, shot)
        page.context.close()


def test_an_operator_sees_the_chart_and_approves_an_extension_from_the_page(
    server: GovernorServer, operator: httpx.Client, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    made = spending_budget(server, operator, "pilot-operator")
    budget_id, extension_id = made["budget"]["id"], made["extension"]

    on_call = new_token(operator, "operator", "on-call pilot-operator")
    page = new_page(browser, server)
    page.clock.install()  # the page's own reload timer waits until the test lets it run
    sign_in(page, on_call["token"])
    section = page.locator(f"#budget-{budget_id}")
    expect(section.locator("h2")).to_have_text("pilot-operator")
    expect(page.locator(".top [data-role=operator]")).to_be_visible()
    expect(section.locator("[data-field=ceiling]")).to_have_text("$8.00")
    expect(section.locator("[data-field=effective-ceiling]")).to_have_text("$8.00")
    # Exhausted: what is left is the released stop margin, and nothing runs any more.
    expect(section.locator("[data-field=state]")).to_have_text(re.compile("exhausted", re.I))
    expect(section.locator("[data-field=released]")).to_be_visible()
    expect(section.locator("[data-field=exhaustion]")).to_contain_text("reached: nothing runs")

    chart = section.locator("svg.spend-chart")
    expect(chart.locator("line[data-role=ceiling]")).to_have_count(1)
    expect(chart.locator("line[data-role=threshold]")).to_have_count(3)
    expect(chart.locator("line[data-role=stop-requested]")).to_have_count(1)
    expect(chart.locator("line[data-role=stop-stopped]")).to_have_count(1)
    spend = chart.locator("path[data-role=spend]")
    d = spend.get_attribute("d") or ""
    # The ledger's points are where spend changes pace (an hour closed, a stop): from the
    # declaration the line rises, then holds once the pod stopped.
    ys = [float(y) for y in re.findall(r"[ML]\s*[\d.]+,([\d.]+)", d)]
    assert len(ys) >= 3 and ys[0] > ys[-1] and ys == sorted(ys, reverse=True), d
    assert int(spend.get_attribute("data-points") or 0) >= 3
    ceiling_y = float(chart.locator("line[data-role=ceiling]").get_attribute("y1") or "nan")
    spend_ys = [float(y) for y in re.findall(r",([\d.]+)", d)]
    assert min(spend_ys) > ceiling_y, "the spend must stay below the ceiling line (higher y)"
    # At its ceiling, the budget says what it would take to go on.
    need = page.locator(f".summary-table tr[data-budget-id='{budget_id}'] [data-field=next]")
    expect(need).to_contain_text(
        re.compile(r"the ceiling was reached at \$[\d.,]+ committed \(spent .*\): nothing runs "
                   r"unless an extension of at least \$[\d.,]+ is approved")
    )  # fmt: skip

    gpus = section.locator(".gpu")
    expect(gpus).to_have_count(2)
    expect(section.locator(".gpu.gpu-ended")).to_have_count(2)  # the pod has stopped
    expect(gpus.first).to_contain_text("last sampled before the stop")
    expect(gpus.first.locator("svg.spark.util path.spark-line")).to_have_count(1)
    expect(gpus.first).to_contain_text("GiB")
    run_row = section.locator(f"tr[data-run-id='{made['run']['id']}']")
    expect(run_row).to_contain_text("stop")
    expect(run_row).to_contain_text("/ 400")
    expect(run_row.locator(".badge.run-stopped")).to_be_visible()  # ended with its pod
    expect(run_row.locator(".late")).to_have_count(0)
    expect(page.locator(".event.sev-critical").first).to_be_visible()

    pending = section.locator(f"li[data-extension-id='{extension_id}']")
    expect(pending).to_contain_text("+$10.00")
    expect(pending).to_contain_text("$18.00")
    shoot(page, tmp_path, "dashboard.png")

    # Approving asks first, and for a note: without one, nothing is sent.
    expect(pending.locator("button.approve")).to_be_hidden()
    pending.locator("summary.approve").click()
    confirm = pending.locator("details.confirm-approve button.approve")
    expect(confirm).to_have_text("Confirm: approve +$10.00")
    expect(pending.locator("details.confirm-approve")).to_contain_text("$18.00")
    confirm.click()
    assert pending.locator("details.confirm-approve textarea").evaluate("t => !t.validity.valid")
    assert extension_state(operator, budget_id, extension_id) == "pending"
    pending.locator("details.confirm-approve textarea").fill("two more epochs, agreed with ML")
    confirm.click()
    # The page strips its notice from the address once shown: wait for the notice itself.
    notice = section.locator(".notice[role=status]")  # in the card acted on, in view
    expect(notice).to_contain_text("approved")
    in_view(notice, LAPTOP)
    expect(section.locator("[data-field=effective-ceiling]")).to_have_text("$18.00")
    expect(section.locator("[data-field=approved-extensions]")).to_have_text("+$10.00")
    expect(section.locator("li.extension")).to_have_count(0)
    expect(section.locator("svg.spend-chart line[data-role=effective]")).to_have_count(1)
    assert extension_state(operator, budget_id, extension_id) == "approved"
    [decided] = ok_list(operator.get("/v1/extensions", params={"budget_id": budget_id}))
    assert decided["decision_note"] == "two more epochs, agreed with ML"
    budget = ok(operator.get(f"/v1/budgets/{budget_id}"))
    assert budget["effective_ceiling_usd"] == "18.00"
    # The decision's event names the token that took it, as the API's events show it.
    events = ok_list(operator.get("/v1/events", params={"budget_id": budget_id}))
    [approval] = [
        e
        for e in events
        if e["subject"] == f"extension:{extension_id}" and " approved by " in e["message"]
    ]
    assert approval["message"].startswith(
        f"Extension of $10.00 approved by operator token 'on-call pilot-operator' "
        f"({on_call['id']}): two more epochs, agreed with ML"
    ), approval["message"]
    assert approval["evidence"]["by"] == {
        "token_id": on_call["id"],
        "role": "operator",
        "label": "on-call pilot-operator",
        "bootstrap": False,
        "teams": None,  # an org-wide token
    }
    shoot(page, tmp_path, "dashboard-approved.png")

    # Open again: the stopped pod can be resumed from the page; the run's new token shows once.
    pod_row = section.locator(f"tr[data-pod-id='{made['pod']['id']}']")
    pod_row.locator("form.resume button").click()
    expect(page.locator("body")).to_contain_text("continues as attempt 2")
    token = page.locator("pre").inner_text().strip()
    assert token.startswith("gov_job_")
    resumed = ok(operator.get(f"/v1/runs/{made['run']['id']}"))
    assert (resumed["attempt"], resumed["status"]) == (2, "running")
    with server.client(token) as job:
        beat = ok(job.post(f"/v1/runs/{made['run']['id']}/heartbeat", json={"step": 400}))
    assert beat["action"] == "continue"

    phone = new_page(browser, server, PHONE)
    phone.clock.install()
    sign_in(phone, server.env["GOVERNOR_OPERATOR_TOKEN"])
    expect(phone.locator(f"#budget-{budget_id} [data-field=effective-ceiling]")).to_have_text(
        "$18.00"
    )
    width = phone.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the page scrolls sideways on a phone ({width} px)"
    shoot(phone, tmp_path, "dashboard-phone.png")


def test_committed_spend_shows_its_parts_and_is_drawn_beside_spend_under_the_ceiling(
    server: GovernorServer, operator: httpx.Client, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    declared = {"name": "pilot-parts", "ceiling_usd": "900", "reserve_usd": "150"}
    budget = ok(operator.post("/v1/budgets", json={**declared, "storage_tail_hours": 48}), 201)
    register_pod(operator, budget["id"], "parts-pod")  # bills compute: a shutdown part
    page = new_page(browser, server)
    page.clock.install()  # the figures below stay those of one rendering
    sign_in(page, viewer_token(operator))
    section = page.locator(f"#budget-{budget['id']}")
    expect(section.locator("h2")).to_have_text("pilot-parts")
    shown = {
        part: section.locator(f"[data-part={part}]").inner_text()
        for part in ("spent", "shutdown", "storage-tail", "reserve")
    }
    committed = section.locator("[data-field=committed]").inner_text()
    assert shown["reserve"] == "$150.00"
    # Each part to the cent, so their sum is committed spend give or take a cent a part.
    amounts = {k: Decimal(v.strip("$").replace(",", "")) for k, v in shown.items()}
    assert abs(sum(amounts.values()) - Decimal(committed.strip("$").replace(",", ""))) <= Decimal(
        "0.02"
    ), (shown, committed)
    # The API gives the same parts unrounded: they add up to its committed spend exactly.
    figures = ok(operator.get(f"/v1/budgets/{budget['id']}"))
    parts = [figures[k] for k in ("spent_usd", "shutdown_usd", "storage_tail_usd", "reserve_usd")]
    assert sum(Decimal(p) for p in parts) == Decimal(figures["committed_usd"])
    assert Decimal(figures["shutdown_usd"]) > 0 and figures["reserve_usd"] == "150.00"

    chart = section.locator("svg.spend-chart")
    spend_d = chart.locator("path[data-role=spend]").get_attribute("d") or ""
    committed_path = chart.locator("path[data-role=committed]")
    expect(committed_path).to_have_count(1)
    expect(committed_path.locator("title")).to_contain_text(f"committed {committed}")
    committed_d = committed_path.get_attribute("d") or ""
    ceiling_y = float(chart.locator("line[data-role=ceiling]").get_attribute("y1") or "nan")
    spend_ys = [float(y) for y in re.findall(r",([\d.]+)", spend_d)]
    committed_ys = [float(y) for y in re.findall(r",([\d.]+)", committed_d)]
    assert len(committed_ys) == len(spend_ys) >= 2, (spend_d, committed_d)
    # Drawn above spend (smaller y) by the reserve and the rest, and still under the ceiling.
    assert all(c < s for c, s in zip(committed_ys, spend_ys, strict=True)), committed_d
    assert min(committed_ys) > ceiling_y, committed_d
    expect(section.locator(".legend .key-committed")).to_contain_text(f"committed {committed}")
    # The row that says when it stops says what committed spend is made of, too.
    row = page.locator(f".summary-table tr[data-budget-id='{budget['id']}']")
    expect(row.locator("[data-field=next]")).to_contain_text("stops parts-pod")
    expect(row.locator("[data-field=committed-parts]")).to_have_text(
        f"committed {committed} = spent {shown['spent']} + shutdown {shown['shutdown']} + "
        f"storage tail {shown['storage-tail']} + reserve $150.00"
    )
    shoot(page, tmp_path, "dashboard-committed-parts.png")


def test_a_viewer_sees_no_buttons_and_a_post_from_a_viewer_is_refused(
    server: GovernorServer, operator: httpx.Client, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    budget = declare_budget(operator, "100", name="pilot-viewer")
    extension_id = request_extension(operator, budget["id"], "5", "a longer eval")
    plan = ok(submit(operator, budget["id"], fresh({"job_id": "viewer-arm"})), 201)
    page = new_page(browser, server)
    sign_in(page, viewer_token(operator))
    expect(page.locator(".top [data-role=viewer]")).to_be_visible()
    # Its admitted plan: nothing spent yet, so it holds back its whole worst case, shown
    # beside committed spend and never in it.
    admitted = page.locator(f"tr[data-plan-id='{plan['id']}']")
    expect(admitted).to_contain_text("viewer-arm")
    expect(admitted.locator("[data-field=plan-spent]")).to_have_text("$0.00")
    worst_case = dollars(Decimal(plan["cost"]["worst_case_usd"]))
    expect(admitted.locator("[data-field=plan-held]")).to_have_text(worst_case)
    card = page.locator(f"#budget-{budget['id']}")
    expect(card.locator("[data-field=held-for-plans]")).to_have_text(worst_case)
    expect(card.locator("[data-field=committed]")).to_have_text("$0.00")
    expect(admitted.locator("[data-field=plan-released]")).to_have_text("no")
    pending = page.locator(f"li[data-extension-id='{extension_id}']")
    expect(pending).to_contain_text("+$5.00")
    expect(pending).to_contain_text("An operator can approve or deny this.")
    expect(page.locator("button.approve")).to_have_count(0)
    expect(page.locator("button.deny")).to_have_count(0)
    shoot(page, tmp_path, "dashboard-viewer.png")

    csrf = page.locator("form[action='/logout'] input[name=csrf]").get_attribute("value")
    refused = page.request.post(
        f"/status/extensions/{extension_id}/approve", form={"csrf": csrf or ""}, max_redirects=0
    )
    assert refused.status == 403, refused.text()
    assert "viewer" in refused.text()
    assert extension_state(operator, budget["id"], extension_id) == "pending"

    as_of = page.locator(".session .muted").inner_text()
    assert "led by" in as_of and "(term " in as_of, as_of  # the one server leads
    wait_for(
        lambda: page.locator(".session .muted").inner_text() != as_of,
        "the page to refresh itself",
        timeout_s=20,
        interval_s=0.5,
    )


def test_a_run_shows_its_latest_metrics_and_a_shared_machines_gpus_say_whose_they_are(
    server: GovernorServer, operator: httpx.Client, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    budget = declare_budget(operator, "1000000", name="pilot-shared")
    # A local pod on the server's two scripted GPUs that owns only GPU 1: GPU 0 is a neighbour's.
    pod_body = {"provider": "fake", "provider_ref": "shared-pod", "local": True}
    pod = ok(
        operator.post(
            f"/v1/budgets/{budget['id']}/pods", json={**pod_body, "gpu_uuids": [uuid_for(1)]}
        ),
        201,
    )
    watch = {"kind": "no_improvement", "metric": "reward_mean", "goal": "max", "window": 50}
    run_body = {"name": "grpo", "pod_id": pod["id"], "policy": {"health": [watch]}}
    run = ok(operator.post(f"/v1/budgets/{budget['id']}/runs", json=run_body), 201)
    with server.client(run["token"]) as job:  # each beat carries what is new since the last
        for step, metrics in (
            (1, {"loss": 2.5, "kl": 0.01, "reward_mean": 0.5, "lr": 1e-4, "grad_norm": 1.0}),
            (2, {"loss": 2.25, "grad_norm": "Infinity"}),
        ):
            body = {"step": step, "metrics": metrics}
            assert (
                ok(job.post(f"/v1/runs/{run['id']}/heartbeat", json=body))["action"] == "continue"
            )
    wait_for(
        lambda: len(get_pod(operator, pod["id"])["telemetry"]["gpus"]) == 2, "both GPUs sampled"
    )

    page = new_page(browser, server)
    page.clock.install()
    sign_in(page, viewer_token(operator))
    section = page.locator(f"#budget-{budget['id']}")
    # The watched metrics first (loss on every run, then this run's reward_mean), then the rest
    # by name, four at most; the infinite grad norm as sent, not its last finite value.
    shown = section.locator(f"tr[data-run-id='{run['id']}'] .metric")
    expect(shown).to_have_text(["loss 2.25", "reward_mean 0.5", "grad_norm Infinity", "kl 0.01"])
    # Each with a sparkline of its recent finite values.
    sparks = shown.locator("svg.metric-spark path.spark-line")
    expect(sparks).to_have_count(4)
    expect(sparks.first).to_have_attribute("data-points", "2")
    expect(sparks.nth(2)).to_have_attribute("data-points", "1")  # Infinity is not a point
    neighbour = section.locator(f".gpu[data-gpu='{uuid_for(0)}']")
    own = section.locator(f".gpu[data-gpu='{uuid_for(1)}']")
    expect(neighbour).to_have_class(re.compile(r"\bgpu-neighbour\b"))
    expect(neighbour.locator(".gpu-owner")).to_have_text("a neighbour's")
    expect(own).not_to_have_class(re.compile(r"\bgpu-neighbour\b"))
    expect(own.locator(".gpu-owner")).to_have_text("the pod's")
    shoot(page, tmp_path, "dashboard-shared.png")

    # The run's own page: each metric's history and its pod's GPUs over the run, with values
    # on hover; then its budget's page, with the run report.
    section.locator(f"tr[data-run-id='{run['id']}'] a").click()
    page.wait_for_url(re.compile(f"/status/runs/{run['id']}$"))
    loss = page.locator("figure[data-series=loss]")
    expect(loss.locator("path.series")).to_have_attribute("data-points", "2")
    expect(loss.locator("rect.hover-band title")).to_have_count(2)
    expect(loss.locator("rect.hover-band title").first).to_have_text(re.compile(r"UTC: 2\.5$"))
    expect(page.locator("figure[data-series='grad_norm'] path.series")).to_have_attribute(
        "data-points",
        "1",  # the infinite value is not a point
    )
    gpu = page.locator("figure[data-series='GPU 1 utilization'] path.series")
    expect(gpu).to_have_count(1)
    assert int(gpu.get_attribute("data-points") or 0) >= 1
    shoot(page, tmp_path, "dashboard-run.png")
    page.locator("nav.crumbs a[href^='/status/budgets/']").click()
    page.wait_for_url(re.compile(f"/status/budgets/{budget['id']}$"))
    expect(page.locator("#report h2")).to_contain_text("Run report: pilot-shared")
    expect(page.locator("#report table.phases")).to_contain_text("total")
    hover = page.locator("svg.spend-chart rect.hover-band title")
    expect(hover.last).to_have_text(re.compile(r"UTC: spent \$[\d,.]+$"))
    expect(page.locator(".events-card .event").first).to_contain_text("pilot-shared")
    shoot(page, tmp_path, "dashboard-budget.png")

    with server.client(viewer_token(operator)) as viewer:
        body = ok(viewer.get("/v1/status"))
    [b] = [b for b in body["budgets"] if b["id"] == budget["id"]]
    assert b["runs"][0]["metrics"] == [
        {"name": "loss", "value": 2.25, "recent": [2.5, 2.25]},
        {"name": "reward_mean", "value": 0.5, "recent": [0.5]},
        {"name": "grad_norm", "value": "Infinity", "recent": [1.0]},
        {"name": "kl", "value": 0.01, "recent": [0.01]},
    ]
    assert [(g["uuid"], g["own"]) for g in b["pods"][0]["gpus"]] == [
        (uuid_for(0), False),
        (uuid_for(1), True),
    ]


def test_an_operator_lists_tokens_and_revokes_one_which_is_refused_at_once(
    server: GovernorServer, operator: httpx.Client, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    me = new_token(operator, "operator", "on-call tokens")
    grafana = new_token(operator, "viewer", "grafana wallboard")
    bootstrap = next(t for t in ok_list(operator.get("/v1/tokens")) if t["bootstrap"])

    wallboard = new_page(browser, server)  # the viewer is signed in elsewhere, and sees no list
    wallboard.clock.install()
    sign_in(wallboard, grafana["token"])
    expect(wallboard.locator(".top a[href='/status/tokens']")).to_have_count(0)
    refused = wallboard.request.get("/status/tokens", max_redirects=0)
    assert refused.status == 403 and "for operators" in refused.text(), refused.text()
    viewer_csrf = wallboard.locator("form[action='/logout'] input[name=csrf]").get_attribute(
        "value"
    )
    refused = wallboard.request.post(
        f"/status/tokens/{me['id']}/revoke", form={"csrf": viewer_csrf or ""}, max_redirects=0
    )
    assert refused.status == 403 and "Only an operator" in refused.text(), refused.text()

    page = new_page(browser, server)
    page.clock.install()
    sign_in(page, me["token"])
    page.locator(".top a[href='/status/tokens']").click()
    page.wait_for_url(re.compile(r"/status/tokens$"))
    row = page.locator(f"tr[data-token-id='{grafana['id']}']")
    expect(row).to_contain_text("grafana wallboard")
    expect(row).to_contain_text("viewer")
    expect(row).to_contain_text("never")  # no expiry
    expect(row.locator("[data-field=state]")).to_have_text("in force")
    mine = page.locator(f"tr[data-token-id='{me['id']}']")
    expect(mine.locator("[data-field=yours]")).to_be_visible()
    expect(mine.locator("summary")).to_have_count(0)  # no Revoke on your own token
    root = page.locator(f"tr[data-token-id='{bootstrap['id']}']")
    expect(root.locator("[data-field=bootstrap]")).to_be_visible()
    expect(root.locator("summary")).to_have_count(0)
    expect(root).to_contain_text("rotate-bootstrap")

    # Forged posts for those two are refused too, and say why.
    csrf = page.locator("form[action='/logout'] input[name=csrf]").get_attribute("value") or ""
    forged = page.request.post(f"/status/tokens/{grafana['id']}/revoke", max_redirects=0)
    assert forged.status == 403, forged.text()  # no CSRF token, nothing revoked
    for token_id, notice in ((me["id"], "revoke-self"), (bootstrap["id"], "revoke-bootstrap")):
        answer = page.request.post(
            f"/status/tokens/{token_id}/revoke", form={"csrf": csrf}, max_redirects=0
        )
        assert answer.headers["location"] == f"/status/tokens?notice={notice}"
    untouched = {me["id"], grafana["id"], bootstrap["id"]}
    listed = ok_list(operator.get("/v1/tokens"))
    assert not any(t["revoked_at"] for t in listed if t["id"] in untouched)

    row.locator("summary.deny").click()  # asks first
    confirm = row.locator("details.confirm-revoke")
    expect(confirm).to_contain_text("grafana wallboard")
    shoot(page, tmp_path, "dashboard-tokens.png")
    confirm.locator("button.deny").click()
    # back on the list (the page drops the notice from its address as it loads)
    expect(page.locator(".notice[role=status]")).to_contain_text("Token revoked")
    assert urlparse(page.url).path == "/status/tokens", page.url
    expect(row.locator("[data-field=state]")).to_contain_text("revoked")
    expect(row.locator("summary")).to_have_count(0)

    # Refused at once: the wallboard's session has ended, and the API says no. Looked at in
    # a new tab: the open one may be taking itself to sign-in on its next refresh, and two
    # navigations of one page interrupt each other.
    tab = wallboard.context.new_page()
    tab.goto("/status")
    assert tab.url.endswith("/login?ended"), tab.url
    expect(tab.locator("body")).to_contain_text("Your session has ended")
    with server.client(grafana["token"]) as gone:
        assert_error(gone.get("/v1/status"), 401)
    events = ok_list(operator.get("/v1/events", params={"category": "operator"}))
    [said] = [
        e for e in events if e["subject"] == f"token:{grafana['id']}" and "revoked" in e["message"]
    ]
    assert f"revoked by operator token 'on-call tokens' ({me['id']})" in said["message"]
    page.context.close()
    wallboard.context.close()


# --- sessions and CSRF over plain HTTP -------------------------------------------------------


def login(server: GovernorServer, token: str) -> httpx.Response:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        return client.post("/login", data={"token": token})


def page_client(server: GovernorServer, cookie: str | None) -> httpx.Client:
    headers = {"Cookie": f"governor_session={cookie}"} if cookie else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30)


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF field on the page"
    return match.group(1)


def test_sessions_are_httponly_strict_cookies_and_decisions_need_the_csrf_token(
    server: GovernorServer, operator: httpx.Client
) -> None:
    with page_client(server, None) as anonymous:
        for path in ("/status", "/status/budgets/bud_x", "/status/runs/run_x"):
            response = anonymous.get(path)
            assert response.status_code == 303 and response.headers["location"] == "/login"
        assert anonymous.get("/login").status_code == 200

    assert login(server, "not-a-token").status_code == 401
    pod = register_pod(operator, declare_budget(operator, "1000", name="pilot-csrf")["id"], "csrf")
    assert login(server, agent_token(operator, pod["id"])).status_code == 403

    token = server.env["GOVERNOR_OPERATOR_TOKEN"]
    signed_in = login(server, token)
    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/status"
    set_cookie = signed_in.headers["set-cookie"]
    assert set_cookie.startswith("governor_session=")
    for flag in ("HttpOnly", "SameSite=strict", "Path=/", "Max-Age="):
        assert flag.lower() in set_cookie.lower(), set_cookie
    cookie = signed_in.cookies["governor_session"]
    assert token not in cookie

    extension_id = request_extension(operator, pod["budget_id"], "3", "csrf check")
    with page_client(server, cookie) as browser_like:
        page = browser_like.get("/status")
        assert page.status_code == 200, page.text[:300]
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        csrf = csrf_of(page.text)
        for missing in ("/status/budgets/bud_nope", "/status/runs/run_nope"):
            assert browser_like.get(missing).status_code == 404
        path = f"/status/extensions/{extension_id}/approve"
        note = {"note": "csrf check", "budget": pod["budget_id"]}
        assert browser_like.post(path, data=note).status_code == 403
        assert browser_like.post(path, data={**note, "csrf": "0" * 64}).status_code == 403
        unsaid = browser_like.post(path, data={"csrf": csrf, "note": "  "})
        assert unsaid.headers["location"].startswith("/status?notice=note-required")
        assert extension_state(operator, pod["budget_id"], extension_id) == "pending"
        approved = browser_like.post(path, data={**note, "csrf": csrf})
        assert approved.status_code == 303, approved.text[:300]
        assert approved.headers["location"] == (
            f"/status?notice=approved&budget={pod['budget_id']}#budget-{pod['budget_id']}"
        )
        assert extension_state(operator, pod["budget_id"], extension_id) == "approved"
        again = browser_like.post(path, data={**note, "csrf": csrf})
        assert again.headers["location"] == "/status?notice=already-decided"

        tampered = cookie[:-1] + ("0" if cookie[-1] != "0" else "1")
        with page_client(server, tampered) as forged:
            assert forged.get("/status").status_code == 303

        out = browser_like.post("/logout", data={"csrf": csrf})
        assert out.status_code == 303 and out.headers["location"] == "/login"
        assert (
            'governor_session=""' in out.headers["set-cookie"]
            or "Max-Age=0" in (out.headers["set-cookie"])
        )
        ended = browser_like.get("/status")  # the same cookie, replayed after signing out
        assert ended.status_code == 303 and ended.headers["location"] == "/login?ended"
        assert "Your session has ended" in browser_like.get("/login?ended").text


# --- GET /v1/status --------------------------------------------------------------------------


def test_get_v1_status_needs_a_viewer_token_and_has_the_dashboards_shape(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget = declare_budget(operator, "20", name="pilot-api")
    pod = register_pod(operator, budget["id"], "api-pod")
    extension_id = request_extension(operator, budget["id"], "2.50", "shape check")
    wait_for(
        lambda: ok(operator.get(f"/v1/budgets/{budget['id']}"))["spent_usd"] != "0.00", "spend"
    )

    with server.client(None) as anonymous:
        assert_error(anonymous.get("/v1/status"), 401)
    with server.client(agent_token(operator, pod["id"])) as agent:
        assert_error(agent.get("/v1/status"), 403)
    with server.client(viewer_token(operator)) as viewer:
        body = ok(viewer.get("/v1/status"))

    assert set(body) == {
        *("at", "budgets", "events", "leader", "teams", "team_id"),
        *("ungoverned", "ungoverned_usd_per_hour"),
    }
    assert set(body["leader"]) == {"replica", "term", "since"}  # the one server leads
    assert body["leader"]["term"] >= 1
    [b] = [b for b in body["budgets"] if b["id"] == budget["id"]]
    money = (
        "ceiling_usd",
        "approved_extensions_usd",
        "effective_ceiling_usd",
        "reserve_usd",
        "spent_usd",
        "committed_usd",
        "remaining_usd",
        "burn_rate_usd_per_hour",
    )
    for key in money:
        assert isinstance(b[key], str) and re.fullmatch(r"-?\d+\.\d{2,6}", b[key]), (key, b[key])
    assert b["name"] == "pilot-api" and b["ceiling_usd"] == "20.00"
    assert b["burn_rate_usd_per_hour"] == "3600.00"
    assert {"spent_pct", "committed_pct", "attention", "projected_exhaustion_at"} <= set(b)
    chart = b["chart"]
    assert chart["ceiling_usd"] == "20.00"
    assert [t["pct"] for t in chart["thresholds"]] == [50, 80, 90]
    assert chart["points"][0]["spent_usd"] == "0.00" and len(chart["points"]) >= 2
    [p] = b["pods"]
    assert (p["id"], p["provider_ref"]) == (pod["id"], "api-pod")
    assert {"state", "spent_usd", "burn_rate_usd_per_hour", "stopped_storage_usd_per_hour"} <= set(
        p
    )
    assert p["gpus"] == []
    step = b["next_step"]  # read seconds after the pod started: the $20 last about 20 s
    assert (step["what"], step["unless"]) == ("stops api-pod", "unless extended")
    assert step["at"] == b["projected_exhaustion_at"]
    assert isinstance(b["seconds_to_ceiling"], float)
    assert b["problems"] == [
        {
            "severity": "warning",
            "kind": "extension-pending",
            "subject": "operator",
            "message": "extension of $2.50 awaits a decision: shape check",
            "run": None,  # the operator asked: no run's request
            "pod": None,
        }
    ]
    [e] = b["pending_extensions"]
    assert (e["id"], e["amount_usd"], e["effective_ceiling_if_approved_usd"]) == (
        extension_id,
        "2.50",
        "22.50",
    )
    assert b["runs"] == []
    assert body["events"] and {"id", "at", "severity", "category", "message"} <= set(
        body["events"][0]
    )


# --- the server goes away and comes back (last: it restarts the module's server) -------------


def test_a_stale_banner_shows_while_the_server_is_down_and_the_session_survives_its_restart(
    server: GovernorServer, operator: httpx.Client, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    declare_budget(operator, "40", name="pilot-stale")
    page = new_page(browser, server)
    page.clock.install()  # each refresh comes when the test moves the page's clock on

    def refreshed_until(done: Callable[[], bool], what: str) -> None:
        def probe() -> bool:
            page.clock.run_for(REFRESH_MS)  # the next refresh is due: it fetches for real
            return done()

        wait_for(probe, what, timeout_s=30, interval_s=0.3)

    sign_in(page, server.env["GOVERNOR_OPERATOR_TOKEN"])
    banner = page.locator("#stale")
    expect(banner).to_be_hidden()
    as_of = page.locator(".session .muted").inner_text()

    server.kill()
    try:
        refreshed_until(banner.is_visible, "the stale banner")
        expect(banner).to_contain_text(re.compile(r"^Stale since \d\d:\d\d:\d\d UTC: "))
        expect(page.locator(".summary-table")).to_be_visible()  # what was shown stays shown
        in_view(banner, LAPTOP)
        shoot(page, tmp_path, "dashboard-stale.png")
    finally:
        server.start().wait_ready()

    refreshed_until(banner.is_hidden, "the stale banner to go")
    # The same cookie still opens the page after the restart: nobody was signed out.
    assert page.url.endswith("/status"), page.url
    expect(page.locator(".top [data-role=operator]")).to_be_visible()
    assert page.locator(".session .muted").inner_text() != as_of
