"""Schemathesis hooks for fuzzing the Modelgate gateway (test/fuzz/).

Each request carries the credentials its route needs, from the environment
the test sets: the demo API key on /v1/..., and on /pay/v1/... a
`pay-signature` made over the exact bytes sent, as the payment provider
would, so that the fuzzer reaches past authentication on both routes.
"""

import hashlib
import hmac
import json
import os
import time

import requests
import schemathesis
from schemathesis.transport.prepare import prepare_url
from schemathesis.transport.requests import prepare_query

API_KEY = os.environ["MODELGATE_FUZZ_API_KEY"]
PAY_KID = os.environ["MODELGATE_FUZZ_PAY_KID"]
PAY_SECRET = os.environ["MODELGATE_FUZZ_PAY_SECRET"].encode()

# The gateway accepts a signature once, and (t, kid, body) is what makes one.
# The fuzzer sends the same body many times a second; a provider would sign
# each request anew, so each repeat of a body gets the unused second nearest
# to now, inside the gateway's 300 s tolerance.
_used_timestamps = {}


def _fresh_timestamp(raw):
    now = int(time.time())
    used = _used_timestamps.setdefault(hashlib.sha256(raw).digest(), set())
    for step in range(0, 581):
        t = now + (step + 1) // 2 * (1 if step % 2 else -1)
        if t not in used and abs(t - now) <= 290:
            used.add(t)
            return t
    return now


# The placeholder the auth provider puts on a payment-route case; before_call
# replaces it with a signature over the bytes actually sent, which are known
# only then.
_TO_SIGN = "to-be-signed"


@schemathesis.auth(refresh_interval=None, retry_on=[])
class ModelgateAuth:
    """The credentials, given as Schemathesis auth rather than only set in
    before_call, so that its ignored_auth check knows they are real: it then
    resends the request without them, and with made-up ones, and expects a
    401 or 403. Set in before_call alone, a credential looks generated to the
    check, and every 2xx is reported as authentication ignored."""

    def get(self, case, context):
        return API_KEY

    def set(self, case, data, context):
        header = ("pay-signature", _TO_SIGN) if case.path.startswith("/pay/") else ("x-api-key", data)
        case.headers = {**(case.headers or {}), header[0]: header[1]}


@schemathesis.hook
def before_call(context, case, kwargs):
    # Only the auth provider's placeholder is replaced by a signature. A case
    # whose credential a check removed or made up (missing_required_header,
    # ignored_auth) goes as it is, or a 200 would be reported as the gateway
    # accepting a request without one. The API key is set by the provider alone.
    if (case.headers or {}).get("pay-signature") != _TO_SIGN:
        return
    if case.path.startswith("/pay/") and (
        case.method.upper() in ("GET", "DELETE") or case.path.endswith("/cancel")
    ):
        # A stored response's read, delete or cancel has no body: the provider
        # signs the request target, exactly as requests will send it
        # (docs/payment-provider.md). Signed over an empty body instead, every
        # cancel was a 401 and the fuzzer never reached the route behind it.
        target = (
            requests.Request(case.method.upper(), prepare_url(case, None), params=prepare_query(case))
            .prepare()
            .path_url
        )
        digest = hmac.new(PAY_SECRET, f"{case.method.upper()} {target}".encode(), hashlib.sha256)
        case.headers = {
            **(case.headers or {}),
            "pay-signature": f"t={int(time.time())},kid={PAY_KID},v1={digest.hexdigest()}",
        }
    else:
        # Serialise the body here and send exactly these bytes, so the signature covers
        # what the gateway receives.
        body = case.body
        unset = body is None or type(body).__name__ == "NotSet"
        if unset:
            raw = b""
        elif isinstance(body, (bytes, bytearray)):
            raw = bytes(body)
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = json.dumps(body).encode()
        digest = hmac.new(PAY_SECRET, raw, hashlib.sha256).hexdigest()
        kwargs["data"] = raw
        case.headers = {
            **(case.headers or {}),
            "content-type": "application/json",
            "pay-signature": f"t={_fresh_timestamp(raw)},kid={PAY_KID},v1={digest}",
        }
