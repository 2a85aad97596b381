"""`governor serve` and `governor migrate`: run the governor, and upgrade its schema."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import ssl
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governor import __version__
from governor.cli.output import refused
from governor.cli.verbs import Commands
from governor.settings import Settings, load_settings

if TYPE_CHECKING:
    import uvicorn
    from sqlalchemy.exc import OperationalError

    from governor.services.context import ServiceContext


def command_line_hint(python: str, path: str) -> str | None:
    """How to reach the `governor` command beside this interpreter (the environment that
    `make serve` set up), when the shell's PATH does not lead to it; None when it does."""
    folder = Path(python).parent
    if not (folder / "governor").is_file():
        return None
    if any(Path(p).resolve() == folder.resolve() for p in path.split(os.pathsep) if p):
        return None
    activate = folder / "activate"
    how = f"'. {activate}'" if activate.is_file() else f"'export PATH={folder}:$PATH'"
    return (
        f"The command line ('governor budget list', ...): in another shell, run {how} "
        "first (docs/tour.md)."
    )


def _serve(args: argparse.Namespace) -> int:
    import uvicorn
    from sqlalchemy.exc import OperationalError

    from governor.app import create_admission_app, create_app
    from governor.bootstrap import (
        DatabaseBehind,
        bootstrap_operator,
        build_context,
        close_context,
        prepare_database,
    )
    from governor.db.schema import MigrationsMissing

    settings = load_settings()
    try:
        tls = _webhook_tls(settings)
    except (OSError, ssl.SSLError) as exc:
        return refused(f"the webhook's certificate, key or client CA cannot be loaded: {exc}")
    try:
        prepare_database(settings)
    except (DatabaseBehind, MigrationsMissing) as exc:
        return refused(str(exc))
    except OperationalError as exc:
        return _unreachable(exc)
    try:
        ctx = build_context(settings)
    except ValueError as exc:  # a fake NVML scenario or a provider setup that cannot work
        return refused(str(exc))
    token = bootstrap_operator(ctx, settings)
    url = f"http://{args.host}:{args.port}"
    print(f"governor {__version__} serving on {url}  (database: {_redact(settings.database_url)})")
    if token:
        print(
            "\nOperator token (shown once; store it now, or set GOVERNOR_OPERATOR_TOKEN "
            "yourself). For the README's tour, in the shell you run it from:\n"
            f"  export GOVERNOR_OPERATOR_TOKEN={token}\n"
        )
    print(f"API docs at {url}/docs; metering every {settings.enforce_interval_s:g} s.")
    print(f"GPU telemetry: {_describe_gpus(ctx)}")
    if settings.webhook_port is not None:
        clients = "required" if settings.webhook_client_ca_file else "not required"
        print(
            f"Kubernetes admission webhook at https://{args.host}:{settings.webhook_port}"
            f"/validate (client certificates {clients})."
        )
    hint = command_line_hint(sys.executable, os.environ.get("PATH", ""))
    if hint:
        print(hint)
    sys.stdout.flush()
    app = create_app(settings, ctx)
    _prepare_interpreter()
    if settings.webhook_port is None:
        uvicorn.run(
            app,
            host=args.host,
            port=args.port,
            log_level=settings.log_level,
            access_log=settings.access_log,
            workers=1,
        )
    else:
        api = uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level=settings.log_level,
            access_log=settings.access_log,
        )
        webhook = uvicorn.Config(
            create_admission_app(settings, ctx),
            host=args.host,
            port=settings.webhook_port,
            log_level=settings.log_level,
            access_log=settings.access_log,
            lifespan="off",
            **tls,
        )
        asyncio.run(_together(uvicorn.Server(api), uvicorn.Server(webhook)))
    close_context(ctx)
    return 0


def _webhook_tls(settings: Settings) -> dict[str, Any]:
    """The webhook server's TLS options, loaded once here so a bad file is refused before
    anything starts: its certificate and key, and the CA a client certificate must be signed
    by (then required) where one is set."""
    if settings.webhook_port is None:
        return {}
    assert settings.webhook_cert_file is not None and settings.webhook_key_file is not None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(settings.webhook_cert_file, settings.webhook_key_file)
    options: dict[str, Any] = {
        "ssl_certfile": str(settings.webhook_cert_file),
        "ssl_keyfile": str(settings.webhook_key_file),
    }
    if settings.webhook_client_ca_file is not None:
        context.load_verify_locations(settings.webhook_client_ca_file)
        options["ssl_ca_certs"] = str(settings.webhook_client_ca_file)
        options["ssl_cert_reqs"] = ssl.CERT_REQUIRED
    return options


async def _together(*servers: uvicorn.Server) -> None:
    """The servers on one event loop, all serving until one of them ends (a signal, or a
    port it could not bind): then all end."""
    tasks = [asyncio.create_task(s.serve()) for s in servers]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for server in servers:
        server.should_exit = True
    await asyncio.gather(*tasks)


# How long a thread that computes may keep the interpreter from one that waits for it (CPython:
# 5 ms). A heartbeat takes the interpreter back half a dozen times, after each wait on the
# database or the event loop; while a pass computes beside it, each of those cost up to the
# whole interval: a lone beat's service call took 27 ms on PostgreSQL and 36 ms on SQLite
# beside a computing thread, 4.8 and 1.9 ms at this interval.
SWITCH_INTERVAL_S = 0.0005


def _prepare_interpreter() -> None:
    """Keep what startup built (modules, the app, the context: some 200,000 objects) out of the
    collector's full passes for the life of the process. Each full pass stops every request
    while it looks at every object: at fleet scale one came every few seconds and took about
    120 ms, the worst of the heartbeats' tail; without startup's objects it takes about 10.
    And let a heartbeat's threads take the interpreter back from a pass sooner
    (SWITCH_INTERVAL_S)."""
    gc.collect()
    gc.freeze()
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def _describe_gpus(ctx: ServiceContext) -> str:
    if ctx.telemetry is None:
        return "off"
    reading = ctx.telemetry.read()
    if not reading.available:
        return f"{reading.unavailable_reason}; pods marked local will have no GPU data."
    names = ", ".join(f"{g.index}: {g.name}" for g in reading.gpus) or "no GPUs"
    return f"{len(reading.gpus)} local GPU(s) ({names}), sampled for pods marked local."


def _migrate(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import OperationalError

    from governor.db import schema

    settings = load_settings()
    try:
        schema.migrations_dir()
    except schema.MigrationsMissing as exc:
        return refused(str(exc))
    print(f"Migrating {_redact(settings.database_url)} to {args.revision} ...")
    try:
        schema.upgrade(settings.database_url, args.revision)
    except OperationalError as exc:
        return _unreachable(exc)
    print("Done: the schema is at", args.revision)
    return 0


def _unreachable(exc: OperationalError) -> int:
    return refused(f"cannot reach the database ({exc.orig}); check GOVERNOR_DATABASE_URL")


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def add_commands(commands: Commands) -> None:
    serve = commands.add_parser(
        "serve", help="run the governor: API and the periodic metering and enforcement"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    serve.set_defaults(handler=_serve)

    migrate = commands.add_parser("migrate", help="upgrade the database schema")
    migrate.add_argument("--revision", default="head", help="target revision (default head)")
    migrate.set_defaults(handler=_migrate)
