"""`governor providers check`: each configured provider's credentials verified and the pods it
can see listed, with their rates (run where the server runs: it reads the server's settings)."""

from __future__ import annotations

import argparse
import logging

from governor.cli.output import refused, table
from governor.cli.verbs import Commands
from governor.domain.text import visible
from governor.settings import load_settings


def _providers_check(_args: argparse.Namespace) -> int:
    from sqlalchemy.exc import OperationalError

    from governor.bootstrap import build_context, close_context
    from governor.db import schema
    from governor.domain.money import format_usd
    from governor.services.fleet import providers

    logging.getLogger("alembic").setLevel(logging.WARNING)  # only its schema check runs here
    settings = load_settings()
    try:
        ctx = build_context(settings)
    except ValueError as exc:  # a provider configured in a way that cannot work
        return refused(str(exc))
    try:
        try:  # the pods registered here, if this governor's database is set up
            ready = schema.schema_status(ctx.engine).at_head
        except (OperationalError, schema.MigrationsMissing):
            ready = False
        registered = providers.registered_pods(ctx) if ready else {}
        checks = providers.check_all(ctx, registered)
    finally:
        close_context(ctx)
    for check in checks:
        mark = "ok" if check.ok else "FAILED"
        print(f"{check.name}: {mark} ({check.capability}): {visible(check.said)}")
        rows = [
            (
                pod.ref,
                pod.description.state.value
                if pod.description.state_known
                else f"{pod.description.state.value} (provider says "
                f"{pod.description.provider_state!r}, unknown)",
                "-"
                if pod.description.hourly_rate_usd is None
                else format_usd(pod.description.hourly_rate_usd),
                "-"
                if pod.description.storage is None
                else f"{pod.description.storage.gb.normalize():f}",
                check.registered.get(pod.ref, "-"),
            )
            for pod in check.pods
        ]
        if rows:
            print(table(("REF", "STATE", "USD/H", "STORAGE GB", "GOVERNED AS"), rows))
        if check.ok and check.unseen:
            unseen = ", ".join(f"{ref} ({pod_id})" for ref, pod_id in sorted(check.unseen.items()))
            print(f"  governed here but not seen by {check.name}: {visible(unseen)}")
    for name, how in sorted(ctx.unconfigured.items()):
        print(f"{name}: not configured ({how})")
    return 0 if all(check.ok for check in checks) else 1


def add_command(commands: Commands) -> None:
    providers = commands.add_parser(
        "providers", help="check the configured cloud providers (run where the server runs)"
    )
    provider_commands = providers.add_subparsers(
        dest="providers_command", required=True, metavar="VERB"
    )
    providers_check = provider_commands.add_parser(
        "check",
        help="verify each configured provider's credentials and list the pods it can see, "
        "with their rates; exit 1 if any provider failed",
    )
    providers_check.set_defaults(handler=_providers_check)
