"""`governor pod`: add, list, show, stop and resume pods."""

from __future__ import annotations

import argparse
from typing import Any

from governor.cli.http import Api, given
from governor.cli.names import BUDGET, POD, budget_filter, names, path_of
from governor.cli.output import fields, gib, paged, pct, per_hour, table, usd
from governor.cli.verbs import (
    Commands,
    Shown,
    budget_arg,
    budget_option,
    group,
    page,
    paging,
    pod_arg,
    verb,
)

POD_HEADERS = ("id", "name", "budget", "provider", "GPUs", "state", "rate", "spent")


def _gpus(p: dict[str, Any]) -> str | None:
    return f"{p['gpu_count'] or '?'} x {p['gpu_type']}" if p["gpu_type"] else None


def show_pod(p: dict[str, Any]) -> str:
    order = p["stop_order"]
    gpus = p["telemetry"]["gpus"]
    text = fields(
        [
            ("id", p["id"]),
            ("name", p["name"]),
            ("budget", p["budget_id"]),
            ("provider", f"{p['provider']} {p['provider_ref']}"),
            ("GPUs", _gpus(p)),
            ("plan", p["plan_id"]),
            ("node", p["node"]),
            ("state", p["state"]),
            ("rate", f"{per_hour(p['hourly_rate_usd'])} ({p['rate_source']})"),
            ("spent", usd(p["spent_usd"])),
            ("stop order", None if order is None else f"{order['id']} {order['state']}"),
            *([("stops by", "terminate only")] if p["terminate_only"] else []),
            *_acknowledged(p["acknowledged_loss"]),
            ("telemetry", p["telemetry"]["note"]),
        ]
    )
    if not gpus:
        return text
    rows = [
        (
            g["index"],
            g["uuid"],
            g["name"],
            pct(g["utilization_pct"]),
            gib(g["memory_used_bytes"], g["memory_total_bytes"]),
            g["at"],
        )
        for g in gpus
    ]
    headers = ("gpu", "uuid", "name", "util", "memory", "at")
    return text + "\n\n" + table(headers, rows, right=(3, 4))


def _acknowledged(loss: dict[str, Any] | None) -> list[tuple[str, str | None]]:
    """What a stop loses and the operator's written acknowledgement, with who wrote it."""
    if loss is None:
        return []
    by = "" if loss["by"] is None else f" (by {loss['by']})"
    return [("a stop loses", loss["lost"]), ("acknowledged", loss["why"] + by)]


def show_pods(pods: list[dict[str, Any]], budgets: dict[str, str]) -> str:
    rows = [
        (
            p["id"],
            p["name"],
            budgets.get(p["budget_id"], p["budget_id"]),
            f"{p['provider']} {p['provider_ref']}",
            _gpus(p),
            p["state"],
            per_hour(p["hourly_rate_usd"]),
            usd(p["spent_usd"]),
        )
        for p in pods
    ]
    return table(POD_HEADERS, rows, right=(6, 7))


def show_stop(o: dict[str, Any], pod: str) -> str:
    if o["state"] == "stopped":
        return (
            f"Pod {pod} was already stopped at {o['confirmed_at']} (stop order {o['id']}, "
            f"{o['reason']}): nothing new was ordered.\n"
            f"Its workspace is kept. To run it again: governor pod resume {pod}"
        )
    return fields(
        [
            ("stop order", o["id"]),
            ("pod", o["pod_id"]),
            ("reason", o["reason"]),
            ("state", o["state"]),
            ("save deadline", o["deadline"]),
        ]
    )


def show_resumed(r: dict[str, Any]) -> str:
    pod, run = r["pod"], r["run"]
    text = fields(
        [
            ("pod", pod["id"]),
            ("state", pod["state"]),
            ("rate", f"{per_hour(pod['hourly_rate_usd'])} ({pod['rate_source']})"),
        ]
    )
    if run is None:
        return text + "\n\nNo unfinished run stopped with this pod: create a run for the next job."
    checkpoint = run["checkpoint"]
    text += "\n" + fields(
        [
            ("run", f"{run['id']} ({run['name']}), attempt {run['attempt']}"),
            ("from", f"step {checkpoint['step']}, {checkpoint['path']}" if checkpoint else None),
        ]
    )
    return (
        f"{text}\n\nThe attempt's job token (shown once; the previous one has ended). Relaunch "
        f"the job with it:\n  {r['token']}"
    )


def pod_add(api: Api, a: argparse.Namespace) -> Shown:
    body = given(
        provider=a.provider,
        provider_ref=a.ref,
        name=a.name,
        hourly_rate_usd=a.rate,
        gpu_type=a.gpu_type,
        gpu_count=a.gpu_count,
        storage_gb=a.storage_gb,
        storage_usd_per_gb_month=a.storage_usd_per_gb_month,
        stopped_storage_usd_per_gb_month=a.stopped_storage_usd_per_gb_month,
        local=a.local or None,
        node=a.node,
        persistent_filesystem=a.persistent_filesystem,
        persistent_mount=a.persistent_mount,
        acknowledge_loss=a.acknowledge_loss,
        plan_id=a.plan,
    )
    return api.call("POST", path_of(api, BUDGET, a.budget, "pods"), body=body), show_pod


def pod_list(api: Api, a: argparse.Namespace) -> Shown:
    params = {"budget_id": budget_filter(api, a.budget), **page(a)}
    pods = api.call("GET", "/v1/pods", params=params)
    budgets = names(api, BUDGET)
    return pods, paged(lambda p: show_pods(p, budgets))


def pod_show(api: Api, a: argparse.Namespace) -> Shown:
    return api.call("GET", path_of(api, POD, a.pod)), show_pod


def pod_stop(api: Api, a: argparse.Namespace) -> Shown:
    body = given(reason=a.reason)
    order = api.call("POST", path_of(api, POD, a.pod, "stop"), body=body)
    return order, lambda o: show_stop(o, a.pod)


def pod_resume(api: Api, a: argparse.Namespace) -> Shown:
    body = given(reason=a.reason)
    return api.call("POST", path_of(api, POD, a.pod, "resume"), body=body), show_resumed


def add_commands(commands: Commands) -> None:
    pods = group(commands, "pod", "add, list, show, stop and resume pods (over HTTP)")
    add = verb(pods, "add", "put a pod under a budget", pod_add)
    budget_arg(add)
    add.add_argument("--provider", required=True, help="e.g. fake")
    add.add_argument("--ref", required=True, help="the provider's id of the pod")
    add.add_argument(
        "--name", help="what to call it, unique within the budget (default: the --ref)"
    )
    add.add_argument("--rate", metavar="USD", help="hourly rate, if the provider reports none")
    add.add_argument("--gpu-type")
    add.add_argument("--gpu-count", type=int)
    add.add_argument("--storage-gb", type=float)
    add.add_argument("--storage-usd-per-gb-month", metavar="USD")
    add.add_argument("--stopped-storage-usd-per-gb-month", metavar="USD")
    add.add_argument("--local", action="store_true", help="the server samples its own GPUs")
    add.add_argument("--node", help="the machine it runs on: that node's agent reports for it")
    add.add_argument(
        "--persistent-filesystem",
        metavar="NAME",
        help="terminate-only pods (lambda, a one-time Spot instance): the filesystem (on aws, "
        "an EBS volume id kept on termination) checkpoints must be saved on",
    )
    add.add_argument(
        "--persistent-mount",
        metavar="PATH",
        help="where that filesystem is mounted on the pod, if the provider cannot say (aws)",
    )
    add.add_argument(
        "--acknowledge-loss",
        metavar="TEXT",
        help="why the pod may be registered although a stop loses its workspace (recorded)",
    )
    add.add_argument(
        "--plan",
        metavar="PLAN_ID",
        help="the checked plan it runs under: the id 'governor plan submit' prints",
    )
    listing = verb(pods, "list", "pods with their state, rate and spend", pod_list)
    budget_option(listing)
    paging(listing, "oldest first")
    pod_arg(verb(pods, "show", "a pod with its spend, stop order and GPUs", pod_show))
    stop = verb(pods, "stop", "stop a pod, keeping its workspace, after its job saves", pod_stop)
    pod_arg(stop)
    stop.add_argument("--reason", help="why (recorded)")
    again = verb(
        pods,
        "resume",
        "start a stopped pod again once its budget is open; prints its run's new job token",
        pod_resume,
    )
    pod_arg(again)
    again.add_argument("--reason", help="why (recorded)")
