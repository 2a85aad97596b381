"""The dashboard's routes: sign in and out, the status page, an operator's decisions and
resumes, and the operator's list of tokens with their revocation.

Thin: each reads its inputs, calls one service and renders or redirects. A viewer may look;
an operator or an approver may decide an extension request, only an operator may resume or
revoke, each only with the session's CSRF token in the form. A token scoped to some teams
sees and acts on those teams' budgets alone: another team's is not found.
"""

from __future__ import annotations

import math
from datetime import timedelta
from html import escape
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from governor.domain.errors import Conflict, Forbidden, NotFound, Unauthenticated, Unavailable
from governor.domain.identity import Authorization
from governor.domain.paging import WHOLE
from governor.render import report_html
from governor.services.fleet import resumes
from governor.services.money import extensions
from governor.services.security import logins, scopes, signins, tokens
from governor.services.security.auth_limits import TooManyAttempts
from governor.services.security.page_sessions import COOKIE, PENDING_COOKIE, PENDING_LIFETIME
from governor.services.view import pages, status, token_list
from governor.web.deps import Context, Form, Now, SignedIn, Tx, WebKit

STATIC = Path(__file__).parent / "static"
ASSETS = {"dashboard.css": "text/css", "refresh.js": "text/javascript"}
REFRESH_S = 5
NOTICES = {
    "approved": ("ok", "Extension approved: the effective ceiling has risen."),
    "denied": ("ok", "Extension denied."),
    "already-decided": ("warning", "That request had already been decided by someone else."),
    "not-found": ("warning", "That request no longer exists."),
    "note-required": ("warning", "Nothing decided: a decision needs a note saying why."),
    "revoked": ("ok", "Token revoked: it is refused from now on, and its sessions have ended."),
    "revoke-self": (
        "warning",
        "Not revoked: you are signed in with that token. Sign in with another operator token "
        "to revoke it.",
    ),
    "revoke-bootstrap": (
        "warning",
        "Not revoked: that is the bootstrap operator token from GOVERNOR_OPERATOR_TOKEN. Set a "
        "new value and run 'governor token rotate-bootstrap' to end it.",
    ),
    "token-not-found": ("warning", "That token no longer exists."),
}
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}

router = APIRouter(include_in_schema=False)


def _render(
    kit: WebKit, request: Request, name: str, context: dict[str, Any], status_code: int = 200
) -> Response:
    return kit.templates.TemplateResponse(
        request, name, context, status_code=status_code, headers=HEADERS
    )


def _to(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303, headers={"Cache-Control": "no-store"})


@router.get("/")
def home() -> RedirectResponse:
    return _to("/status")


ENDED = (
    "Your session has ended: it expired (sessions last 12 h), you signed out, its token was "
    "revoked or expired, or the server's session secret changed. Sign in again."
)


def _login_page(
    kit: WebKit, request: Request, ctx: Context, error: str | None, code: int = 200
) -> Response:
    ended = ENDED if error is None and request.query_params.get("ended") is not None else None
    provider = None if ctx.signin is None else ctx.signin.provider_name
    context = {"error": error, "ended": ended, "provider": provider}
    return _render(kit, request, "login.html", context, code)


@router.get("/login")
def login_form(request: Request, kit: WebKit, page: SignedIn, ctx: Context) -> Response:
    if page is not None:
        return _to("/status")
    return _login_page(kit, request, ctx, None)


def _callback_uri(request: Request, ctx: Context) -> str:
    """Where the identity provider sends the browser back to: under the public address when
    one is set (behind a proxy), else as this request reached the server."""
    assert ctx.signin is not None
    if ctx.signin.public_url:
        return f"{ctx.signin.public_url}/login/oidc/callback"
    return str(request.url_for("oidc_callback"))


def _address(request: Request, ctx: Context) -> str:
    """The client address the limits of failed authentications count by."""
    peer = request.client.host if request.client else None
    return ctx.address_of(peer, request.headers.get("x-forwarded-for"))


def _too_many(kit: WebKit, request: Request, ctx: Context, exc: TooManyAttempts) -> Response:
    """The sign-in page saying why it refuses now, with Retry-After (429)."""
    response = _login_page(kit, request, ctx, f"{exc.message}.", 429)
    response.headers["Retry-After"] = str(math.ceil(exc.retry_after_s))
    return response


@router.get("/login/oidc")
def oidc_start(request: Request, kit: WebKit, ctx: Context, now: Now) -> Response:
    """Off to the identity provider (authorization code flow with PKCE); what its return is
    checked against rides in a signed cookie for ten minutes."""
    if ctx.identity is None:
        return _said("Not found", "Sign-in through an identity provider is not configured.", 404)
    try:
        ctx.auth_limits.started(_address(request, ctx))
        started = ctx.identity.start(_callback_uri(request, ctx))
    except Unavailable as exc:
        return _login_page(kit, request, ctx, f"{exc.message}. Try again shortly.", 503)
    except TooManyAttempts as exc:
        return _too_many(kit, request, ctx, exc)
    response = RedirectResponse(started.url, 303, headers={"Cache-Control": "no-store"})
    pending = kit.keys.issue_pending(started.state, started.code_verifier, started.nonce, now)
    # Lax: the provider's redirect back is a navigation from another site
    response.set_cookie(
        PENDING_COOKIE,
        pending,
        max_age=int(PENDING_LIFETIME.total_seconds()),
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/login/oidc",
    )
    return response


@router.get("/login/oidc/callback", name="oidc_callback")
def oidc_callback(request: Request, kit: WebKit, ctx: Context, tx: Tx, now: Now) -> Response:
    """Back from the identity provider: the code exchanged (with the PKCE verifier), the ID
    token checked, the person's groups mapped to a role; then a page session, as a pasted
    token opens one."""
    if ctx.identity is None or ctx.signin is None:
        return _said("Not found", "Sign-in through an identity provider is not configured.", 404)
    query = request.query_params
    pending = kit.keys.read_pending(request.cookies.get(PENDING_COOKIE), now)
    if query.get("error"):
        said = query.get("error_description") or query["error"]
        return _login_page(kit, request, ctx, f"The identity provider refused: {said}.", 401)
    if pending is None or not query.get("code") or query.get("state") != pending[0]:
        return _login_page(
            kit, request, ctx, "That sign-in had expired or was not started here: try again.", 400
        )
    state, verifier, nonce = pending
    try:
        vouched = ctx.identity.finish(
            Authorization("", state, verifier, nonce), _callback_uri(request, ctx), query["code"]
        )
        with tx() as session:
            token_id = signins.open_page_session(session, vouched, ctx.signin, now)
    except Unauthenticated as exc:
        try:
            ctx.auth_limits.failed(_address(request, ctx))
        except TooManyAttempts as many:
            return _too_many(kit, request, ctx, many)
        return _login_page(kit, request, ctx, f"{exc.message}.", 401)
    except Forbidden as exc:
        return _login_page(kit, request, ctx, f"{exc.message}.", 403)
    except Unavailable as exc:
        return _login_page(kit, request, ctx, f"{exc.message}. Try again shortly.", 503)
    lifetime = timedelta(seconds=ctx.signin.session_s)
    value, max_age = kit.keys.issue(token_id, now, lifetime)
    # A page, not a redirect: after a navigation that began at another site the browser
    # withholds a SameSite=Strict cookie from redirects; a page's own link sends it.
    response = _said("Signed in", f"Signed in as {vouched.identity.said}.", refresh="/status")
    response.set_cookie(
        COOKIE,
        value,
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    response.delete_cookie(PENDING_COOKIE, path="/login/oidc", httponly=True, samesite="lax")
    return response


@router.post("/login")
async def login(request: Request, kit: WebKit, form: Form, ctx: Context, now: Now) -> Response:
    """Exchange a viewer or operator token for a session cookie (HttpOnly, SameSite=Strict).
    The token is checked as the API checks one, under the same limits."""
    peer = request.client.host if request.client else None
    forwarded_for = request.headers.get("x-forwarded-for")
    token = form.get("token", "").strip()

    def again(code: int, message: str) -> Response:
        return _login_page(kit, request, ctx, message, code)

    try:
        found = logins.sign_in(await ctx.caller(token, peer, forwarded_for, run_in_threadpool))
    except Forbidden:
        return again(403, "That token cannot open the dashboard: use a viewer or operator token.")
    except Unauthenticated:
        return again(401, "Unknown token. Paste a viewer or operator token.")
    except Unavailable as exc:
        return again(503, f"{exc.message}.")
    except TooManyAttempts as exc:
        return _too_many(kit, request, ctx, exc)
    value, max_age = kit.keys.issue(found.token_id, now)
    response = _to("/status")
    response.set_cookie(
        COOKIE,
        value,
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/logout")
def logout(page: SignedIn, kit: WebKit, form: Form, tx: Tx, now: Now) -> Response:
    if page is not None:
        if not kit.keys.csrf_ok(page, form.get("csrf")):
            return _refused("The form had expired; reload the page and try again.")
        kit.keys.end(page, now)
        with tx() as session:
            signins.sign_out(session, page.token_id, now)
    response = _to("/login")
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


@router.get("/status")
def status_page(
    request: Request, kit: WebKit, page: SignedIn, ctx: Context, tx: Tx, now: Now
) -> Response:
    """The dashboard: what needs an operator first, then every budget, its chart, pods, GPUs,
    runs, pending requests, and the latest events."""
    if page is None:
        return _signed_out(request)
    team = request.query_params.get("team") or None
    with tx() as session:
        scope = tokens.holder(session, page.token_id).teams
        dashboard = status.dashboard(session, ctx.config, now, team=team, scope=scope)
    notice = NOTICES.get(request.query_params.get("notice", ""))
    shown = {b.id for b in dashboard.budgets}
    near = request.query_params.get("budget")  # the card acted on: the notice shows there
    context = {
        "dash": dashboard,
        "at": dashboard.at,
        "page": page,
        "notice": notice,
        "notice_budget": near if near in shown else None,
        "refresh_s": REFRESH_S,
    }
    return _render(kit, request, "status.html", context)


@router.get("/status/budgets/{budget_id}")
def budget_page(
    budget_id: str, request: Request, kit: WebKit, page: SignedIn, ctx: Context, tx: Tx, now: Now
) -> Response:
    """One budget: its figures, chart, pods, GPUs, runs and requests, its events, and its run
    report (spend by phase, stops, failures, extensions, peaks, the whole timeline)."""
    if page is None:
        return _signed_out(request)
    try:
        with tx() as session:
            scopes.require_seen(
                session, tokens.holder(session, page.token_id), {"budget_id": budget_id}
            )
            view = pages.budget_page(session, ctx.config, budget_id, now)
            report = report_html.body(view.report)
    except NotFound as exc:
        return _said("Not found", str(exc), 404)
    context = {
        "dash": view,
        "at": view.at,
        "page": page,
        "notice": None,
        "notice_budget": None,
        "report": report,
        "refresh_s": REFRESH_S,
    }
    return _render(kit, request, "budget.html", context)


@router.get("/status/runs/{run_id}")
def run_page(
    run_id: str, request: Request, kit: WebKit, page: SignedIn, ctx: Context, tx: Tx, now: Now
) -> Response:
    """One run: its metric history, its pod's GPU history over the run, its phases, events."""
    if page is None:
        return _signed_out(request)
    try:
        with tx() as session:
            scopes.require_seen(session, tokens.holder(session, page.token_id), {"run_id": run_id})
            view = pages.run_page(session, ctx.config, run_id, now)
    except NotFound as exc:
        return _said("Not found", str(exc), 404)
    context = {"dash": view, "at": view.at, "page": page, "refresh_s": REFRESH_S}
    return _render(kit, request, "run.html", context)


@router.post("/status/extensions/{extension_id}/{decision}")
def decide(
    extension_id: str,
    decision: Literal["approve", "deny"],
    page: SignedIn,
    kit: WebKit,
    form: Form,
    ctx: Context,
    tx: Tx,
    now: Now,
) -> Response:
    """An operator approves or denies a pending extension from the page."""
    if page is None:
        return _to("/login")
    if not kit.keys.csrf_ok(page, form.get("csrf")):
        return _refused("The form had expired; reload the page and try again.")
    if not page.can_decide:
        return _refused(
            "A viewer token can look but not decide: sign in as an operator or an approver."
        )
    approve = decision == "approve"
    note = form.get("note", "").strip()
    if not note:  # the API keeps a note optional; a decision taken on the page says why
        return _to(_near(form.get("budget", ""), "note-required"))
    try:
        with tx() as session:
            by = tokens.holder(session, page.token_id)
            scopes.require_seen(session, by, {"extension_id": extension_id})
            row = extensions.decide(session, ctx.config, extension_id, approve, note, now, by=by)
    except Forbidden as exc:
        return _refused(exc.message)
    except Conflict:
        return _to("/status?notice=already-decided")
    except NotFound:
        return _to("/status?notice=not-found")
    return _to(_near(row.budget_id, "approved" if approve else "denied"))


def _near(budget_id: str, notice: str) -> str:
    """Back to the page, scrolled to the budget acted on, with the notice shown in its card."""
    if not budget_id.replace("_", "").isalnum():  # an id, or nothing to scroll to
        return f"/status?notice={notice}"
    return f"/status?notice={notice}&budget={budget_id}#budget-{budget_id}"


@router.post("/status/pods/{pod_id}/resume")
def resume(pod_id: str, page: SignedIn, kit: WebKit, form: Form, ctx: Context, tx: Tx) -> Response:
    """An operator resumes a stopped pod from the page; its run's new token is shown once."""
    if page is None:
        return _to("/login")
    if not kit.keys.csrf_ok(page, form.get("csrf")):
        return _refused("The form had expired; reload the page and try again.")
    if not page.can_operate:
        return _refused("Only an operator can resume a pod: sign in as an operator.")
    try:
        with tx() as session:
            by = tokens.holder(session, page.token_id)
            scopes.require_seen(session, by, {"pod_id": pod_id})
        resumed = resumes.resume(ctx, pod_id, "from the dashboard", by=by)
    except (Conflict, NotFound, Unavailable) as exc:
        return _said("Not resumed", str(exc), 409)
    if resumed.run is None or resumed.token is None:
        return _said(
            "Pod resumed", "No unfinished run stopped with it: create a run for the next job."
        )
    return _said(
        "Pod resumed",
        f"Run {resumed.run.name!r} continues as attempt {resumed.run.attempt}. Relaunch its job "
        "with this token (shown once; the previous one has ended):",
        token=resumed.token,
    )


@router.get("/status/tokens")
def tokens_page(request: Request, kit: WebKit, page: SignedIn, tx: Tx, now: Now) -> Response:
    """Every token on file, for operators: whom each is for, what it is bound to (by name),
    when it ends, and Revoke."""
    if page is None:
        return _signed_out(request)
    if not page.can_operate:
        return _refused("Tokens are for operators: sign in with an operator token to see them.")
    with tx() as session:
        shown = token_list.token_list(session, WHOLE, tokens.holder(session, page.token_id).teams)
    context = {
        "tokens": shown.tokens,
        "more": shown.more,
        "at": now,
        "page": page,
        "notice": NOTICES.get(request.query_params.get("notice", "")),
        "refresh_s": REFRESH_S,
    }
    return _render(kit, request, "tokens.html", context)


@router.post("/status/tokens/{token_id}/revoke")
def revoke_token(
    token_id: str, page: SignedIn, kit: WebKit, form: Form, ctx: Context, tx: Tx, now: Now
) -> Response:
    """An operator revokes a token from the page: refused for the one they are signed in
    with (they would lock themselves out mid-click) and for the bootstrap token."""
    if page is None:
        return _to("/login")
    if not kit.keys.csrf_ok(page, form.get("csrf")):
        return _refused("The form had expired; reload the page and try again.")
    if not page.can_operate:
        return _refused("Only an operator can revoke a token: sign in as an operator.")
    if token_id == page.token_id:
        return _to("/status/tokens?notice=revoke-self")
    try:
        with tx() as session:
            by = tokens.holder(session, page.token_id)
            scopes.require_seen(session, by, {"token_id": token_id})
            tokens.revoke(session, token_id, now, by=by)
    except Conflict:
        return _to("/status/tokens?notice=revoke-bootstrap")
    except NotFound:
        return _to("/status/tokens?notice=token-not-found")
    ctx.tokens.forget(lambda p: p.token_id == token_id)  # the API refuses it at once here too
    return _to("/status/tokens?notice=revoked")


def _signed_out(request: Request) -> RedirectResponse:
    """To the sign-in form; one that says why when the browser still sent a session."""
    return _to("/login?ended" if request.cookies.get(COOKIE) else "/login")


def _refused(message: str) -> Response:
    return _said("Refused", message, 403)


def _said(
    title: str,
    message: str,
    code: int = 200,
    *,
    token: str | None = None,
    refresh: str | None = None,
) -> Response:
    shown = f"<pre>{escape(token)}</pre>" if token else ""
    onward = f'<meta http-equiv=refresh content="0;url={escape(refresh)}">' if refresh else ""
    body = (
        f"<!doctype html><meta charset=utf-8>{onward}<title>{escape(title)}</title>"
        f"<p>{escape(message)}</p>{shown}<p><a href=/status>Back to the dashboard</a></p>"
    )
    return Response(body, status_code=code, media_type="text/html", headers=HEADERS)


@router.get("/static/{name}")
def asset(name: str) -> Response:
    if name not in ASSETS:
        return Response("not found", status_code=404, media_type="text/plain")
    return FileResponse(
        STATIC / name, media_type=ASSETS[name], headers={"Cache-Control": "max-age=300"}
    )
