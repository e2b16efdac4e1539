"""The calls around a response and a batch, with the official Python client.

The Python client sends `Content-Type: application/json` on every call, an
empty body included (DELETE, cancel), where the Node client sends no body and
no type. Reads MODELGATE_BASE_URL (the gateway's /v1), MODELGATE_API_KEY and
MODELGATE_BATCH_LINES (a JSONL input file); prints one JSON object with what
each call answered.
"""

import io
import json
import os
import time

import openai
from openai import OpenAI

client = OpenAI(
    base_url=os.environ["MODELGATE_BASE_URL"],
    api_key=os.environ["MODELGATE_API_KEY"],
    max_retries=0,
)
seen = {}

# A stored response: read it, its input items, try to cancel it, delete it, then it is gone.
response = client.responses.create(
    model="tiny-gpt", input="Hello", max_output_tokens=4, temperature=0
)
seen["retrieved_id"] = client.responses.retrieve(response.id).id
seen["input_texts"] = [
    part.text
    for item in client.responses.input_items.list(response.id).data
    for part in item.content
]
# Answered in the foreground, so not cancellable: a 400, as OpenAI's.
try:
    client.responses.cancel(response.id)
    seen["cancel"] = "cancelled"
except openai.BadRequestError as error:
    seen["cancel"] = [error.status_code, error.code]
client.responses.delete(response.id)
try:
    client.responses.retrieve(response.id)
    seen["after_delete"] = "found"
except openai.NotFoundError as error:
    seen["after_delete"] = error.status_code

# A batch to its end; then a second one cancelled at once; then the file deleted.
lines = os.environ["MODELGATE_BATCH_LINES"].encode()
upload = client.files.create(file=("input.jsonl", io.BytesIO(lines)), purpose="batch")


def create_batch():
    return client.batches.create(
        input_file_id=upload.id, endpoint="/v1/responses", completion_window="24h"
    )


batch = create_batch()
deadline = time.monotonic() + 60
while batch.status not in ("completed", "failed", "expired", "cancelled"):
    if time.monotonic() > deadline:
        break
    time.sleep(0.2)
    batch = client.batches.retrieve(batch.id)
seen["batch_status"] = batch.status
seen["batch_counts"] = batch.request_counts.model_dump()
seen["output_lines"] = [
    json.loads(line)["custom_id"]
    for line in client.files.content(batch.output_file_id).text.splitlines()
]
cancelled = client.batches.cancel(create_batch().id)
seen["cancel_status"] = cancelled.status
seen["file_deleted"] = client.files.delete(upload.id).deleted
print(json.dumps(seen))
