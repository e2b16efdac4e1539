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

import schemathesis

API_KEY = os.environ["MODELGATE_FUZZ_API_KEY"]
PAY_KID = os.environ["MODELGATE_FUZZ_PAY_KID"]
PAY_SECRET = os.environ["MODELGATE_FUZZ_PAY_SECRET"].encode()


@schemathesis.hook
def before_call(context, case, kwargs):
    if case.path.startswith("/pay/"):
        # Serialise the body here and send exactly these bytes, so the signature covers
        # what the gateway receives.
        body = case.body
        unset = body is None or type(body).__name__ == "NotSet"
        raw = b"" if unset else json.dumps(body).encode()
        digest = hmac.new(PAY_SECRET, raw, hashlib.sha256).hexdigest()
        kwargs["data"] = raw
        case.headers = {
            **(case.headers or {}),
            "content-type": "application/json",
            "pay-signature": f"t={int(time.time())},kid={PAY_KID},v1={digest}",
        }
    else:
        case.headers = {**(case.headers or {}), "x-api-key": API_KEY}
