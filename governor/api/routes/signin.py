"""Sign-in from the command line through the identity provider (the device flow, RFC 8628).

The governor, the provider's confidential client, asks on the command line's behalf: the
command line needs no client secret and no provider settings, only the governor's address.
Neither route takes a token: the person proves who they are at the provider.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from governor.api.deps import Context, Now, Tx
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import DeviceSigninOut, DeviceTokenIn, DeviceTokenOut
from governor.domain.errors import NotFound
from governor.domain.ports import IdentityProvider
from governor.services.context import ServiceContext
from governor.services.security import signins
from governor.services.security.signins import SigninConfig

router = api_router(tags=["sign-in"])


def _configured(ctx: ServiceContext) -> tuple[IdentityProvider, SigninConfig]:
    if ctx.identity is None or ctx.signin is None:
        raise NotFound("sign-in through an identity provider is not configured on this server")
    return ctx.identity, ctx.signin


@router.post("/v1/signin/device", response_model=DeviceSigninOut, responses=errors(401, 503))
async def start_device(ctx: Context) -> DeviceSigninOut:
    """Start a device sign-in: the code to confirm, and where."""
    provider, _ = _configured(ctx)
    code = await run_in_threadpool(provider.start_device)
    return DeviceSigninOut(
        device_code=code.device_code,
        user_code=code.user_code,
        verification_uri=code.verification_uri,
        verification_uri_complete=code.verification_uri_complete,
        expires_in_s=code.expires_in,
        interval_s=code.interval,
    )


@router.post(
    "/v1/signin/device/token", response_model=DeviceTokenOut, responses=errors(401, 403, 503)
)
def device_token(body: DeviceTokenIn, ctx: Context, tx: Tx, now: Now) -> DeviceTokenOut:
    """Poll a device sign-in: `pending`, or the person's short-lived token (403 when no group
    of theirs is mapped to a role; 401 when the provider refused or the code expired)."""
    provider, config = _configured(ctx)
    vouched = provider.poll_device(body.device_code)
    if vouched is None:
        return DeviceTokenOut(status="pending")
    with tx() as session:
        minted = signins.command_line_token(session, vouched, config, now)
    return DeviceTokenOut(
        status="signed_in",
        token=minted.token,
        token_id=minted.token_id,
        role=minted.role,
        teams=None if minted.teams is None else list(minted.teams),
        person=minted.person,
        expires_at=minted.expires_at,
    )
