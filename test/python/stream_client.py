"""Streams one response through the gateway with the official Python client.

Reads MODELGATE_BASE_URL (the gateway's /v1), MODELGATE_API_KEY and
MODELGATE_MODEL; prints one JSON object: the event types in order, their
sequence numbers, the concatenated deltas, the terminal response's text and
usage. (`responses.stream(...).get_final_response()` is left out: the
client raises unless the stream ends with response.completed, and a
generated test model never reaches its end-of-sequence token; the Node
client's finalResponse() is tested in streaming.test.ts.)
"""

import json
import os

from openai import OpenAI

client = OpenAI(
    base_url=os.environ["MODELGATE_BASE_URL"],
    api_key=os.environ["MODELGATE_API_KEY"],
    max_retries=0,
)
request = {
    "model": os.environ["MODELGATE_MODEL"],
    "input": "Tell me about the sea",
    "max_output_tokens": 24,
    "temperature": 0,
}

types = []
sequence = []
deltas = []
terminal = None
for event in client.responses.create(**request, stream=True):
    types.append(event.type)
    sequence.append(event.sequence_number)
    if event.type == "response.output_text.delta":
        deltas.append(event.delta)
    if event.type in ("response.completed", "response.incomplete", "response.failed"):
        terminal = event.response

print(
    json.dumps(
        {
            "types": types,
            "sequence": sequence,
            "text": "".join(deltas),
            "terminal_text": terminal.output_text if terminal else None,
            "usage": terminal.usage.model_dump() if terminal and terminal.usage else None,
            "status": terminal.status if terminal else None,
        }
    )
)
