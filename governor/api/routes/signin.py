"""Sign-in from the command line through the identity provider (the device flow, RFC 8628).

The governor, the provider's confidential client, asks on the command line's behalf: the
command line needs no client secret and no provider settings, only the governor's address.
Neither route takes a token: the person proves who they are at the provider.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from governor.api.deps import Context, Now
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import DeviceOutcomeOut, DeviceSigninOut, DeviceTokenIn
from governor.domain.errors import NotFound
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


@router.post("/v1/signin/device", response_model=DeviceSigninOut, responses=errors(404, 503))
async def start_device(ctx: Context) -> DeviceSignin:
    """Start a device sign-in: the code to confirm, and where (404 where sign-in through an
    identity provider is not configured)."""
    provider, _ = _configured(ctx)
    return await run_in_threadpool(signins.start_device, provider)


@router.post(
    "/v1/signin/device/token",
    response_model=DeviceOutcomeOut,
    responses=errors(401, 403, 404, 503),
)
def device_token(body: DeviceTokenIn, ctx: Context, now: Now) -> DeviceOutcome:
    """Poll a device sign-in: `pending`, or the person's short-lived token (403 when no group
    of theirs is mapped to a role; 401 when the provider refused or the code expired)."""
    provider, config = _configured(ctx)
    return signins.finish_device(ctx.unit_of_work, provider, config, body.device_code, now)
