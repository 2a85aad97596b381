"""Sign-in from the command line through the identity provider (the device flow, RFC 8628).

The governor, the provider's confidential client, asks on the command line's behalf: the
command line needs no client secret and no provider settings, only the governor's address.
Neither route takes a token: the person proves who they are at the provider. Both are under
the limits of failed authentications per client address (`AuthLimits`): a start past its
source's starts in a window, or a poll the provider refuses past its failures, is 429.
"""

from __future__ import annotations

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from governor.api.deps import Context, Now
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import DeviceOutcomeOut, DeviceSigninOut, DeviceTokenIn
from governor.domain.errors import NotFound, Unauthenticated
from governor.domain.ports import IdentityProvider
from governor.services.context import ServiceContext
from governor.services.security import signins
from governor.services.security.signin_model import DeviceOutcome, DeviceSignin
from governor.services.security.signins import SigninConfig

router = api_router(tags=["sign-in"])


def _configured(ctx: ServiceContext) -> tuple[IdentityProvider, SigninConfig]:
    if ctx.identity is None or ctx.signin is None:
        raise NotFound("sign-in through an identity provider is not configured on this server")
    return ctx.identity, ctx.signin


def _address(request: Request, ctx: ServiceContext) -> str:
    peer = request.client.host if request.client else None
    return ctx.address_of(peer, request.headers.get("x-forwarded-for"))


@router.post("/v1/signin/device", response_model=DeviceSigninOut, responses=errors(404, 429, 503))
async def start_device(request: Request, ctx: Context) -> DeviceSignin:
    """Start a device sign-in: the code to confirm, and where (404 where sign-in through an
    identity provider is not configured; 429, with Retry-After, past the sign-ins a client
    address may start in a minute)."""
    provider, _ = _configured(ctx)
    ctx.auth_limits.started(_address(request, ctx))
    return await run_in_threadpool(signins.start_device, provider)


@router.post(
    "/v1/signin/device/token",
    response_model=DeviceOutcomeOut,
    responses=errors(401, 403, 404, 429, 503),
)
def device_token(request: Request, body: DeviceTokenIn, ctx: Context, now: Now) -> DeviceOutcome:
    """Poll a device sign-in: `pending`, or the person's short-lived token (403 when no group
    of theirs is mapped to a role; 401 when the provider refused or the code expired, counted
    as a failed authentication: 429, with Retry-After, past its address's failures)."""
    provider, config = _configured(ctx)
    try:
        return signins.finish_device(ctx.unit_of_work, provider, config, body.device_code, now)
    except Unauthenticated:
        ctx.auth_limits.failed(_address(request, ctx))
        raise
