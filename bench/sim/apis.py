"""apis: the OpenAI Responses and Anthropic Messages APIs of llmsim.

What a simulated engine needs to answer them as vLLM does (vLLM's
/v1/responses with VLLM_ENABLE_RESPONSES_API_STORE=1, its /v1/messages):

* the prompt the engine renders, in the order the module's keys read it
  (docs/directives.md, "The OpenAI key"): the system prompt (Responses'
  `instructions`, Anthropic's `system`, or a first message of role system
  or developer), the tools, then the conversation; one renderer
  (render()) for chat, Responses and Anthropic bodies, so that the same
  conversation is the same prompt text in each API's shape;
* the response store of one instance (Store): each response kept with the
  messages its prompt was made of and its output, so that a follow-up
  naming it in `previous_response_id` continues that conversation (its
  messages first, as vLLM's msg_store does), and a retrieve, delete or
  cancel of an id this instance did not make is answered 404;
* the JSON and the server-sent events of each API (ResponsesShape,
  MessagesShape): OpenAI's response.created, response.in_progress,
  output_item.added, content_part.added, output_text.delta ..., then the
  .done events and response.completed; Anthropic's message_start,
  content_block_start, content_block_delta ..., content_block_stop,
  message_delta, message_stop.

No aiohttp here: plain functions over dicts, tested in bench/test_bench.py.
"""

import json
import os
import time

BOS = "<|begin_of_text|>"
HEADER = "<|start_header_id|>%s<|end_header_id|>\n\n%s<|eot_id|>"
ASSISTANT = "<|start_header_id|>assistant<|end_header_id|>\n\n"


class NotFound(LookupError):
    """previous_response_id names a response this instance does not hold."""


# ---------------------------------------------------------------------------
# rendering


def _compact(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def tool_text(t):
    """A tool as text: its type unless function or custom, name,
    description and parameters (Anthropic: input_schema) as JSON; chat's
    {"type":"function","function":{...}}, a Responses function tool and
    an Anthropic tool of the same function are the same text."""
    if not isinstance(t, dict):
        return ""
    f = t.get("function") if isinstance(t.get("function"), dict) else t
    out = []
    typ = t.get("type")
    if isinstance(typ, str) and typ not in ("function", "custom"):
        out.append(typ)
    for k in ("name", "description"):
        if isinstance(f.get(k), str):
            out.append(f[k])
    params = f.get("parameters", f.get("input_schema"))
    if params is not None:
        out.append(_compact(params))
    return "\n".join(out)


def render(msgs, tools=None, lead_max=1):
    """Llama-3 template of (role, text) messages, the tools after the
    leading system prompt: at most lead_max messages of role system or
    developer (2 for Responses' instructions and a first input item of
    role system or developer)."""
    parts = [BOS]
    lead = 0
    while (lead < len(msgs) and lead < lead_max
           and msgs[lead][0] in ("system", "developer")):
        lead += 1
    for role, text in msgs[:lead]:
        parts.append(HEADER % (role, text))
    if tools:
        parts.append(HEADER % ("tools", "\n\n".join(tool_text(t)
                                                     for t in tools)))
    for role, text in msgs[lead:]:
        parts.append(HEADER % (role, text))
    parts.append(ASSISTANT)
    return "".join(parts)


def _parts_text(content, kinds=("text", "input_text", "output_text")):
    """A string, or the text of a list of parts (text, input_text,
    output_text, image_url / input_image urls, file data)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    out = []
    for c in content:
        if isinstance(c, str):
            out.append(c)
            continue
        if not isinstance(c, dict):
            continue
        if isinstance(c.get("text"), str):
            out.append(c["text"])
        iu = c.get("image_url")
        if isinstance(iu, dict):
            iu = iu.get("url")
        if isinstance(iu, str):
            out.append(iu)
        if isinstance(c.get("file_data"), str):
            out.append(c["file_data"])
    return "".join(out)


def chat_messages(messages):
    """chat's messages -> (role, text), as llmsim's chat template read
    them before (a non-dict message is an empty user message)."""
    out = []
    for m in messages:
        content = m.get("content", "") if isinstance(m, dict) else ""
        if isinstance(content, list):
            content = "".join(c.get("text", "") for c in content
                              if isinstance(c, dict))
        if not isinstance(content, str):
            content = str(content)
        role = m.get("role", "user") if isinstance(m, dict) else "user"
        out.append((role, content))
    return out


def responses_items(inp):
    """A Responses `input` (a string or items) -> (role, text)."""
    if isinstance(inp, str):
        return [("user", inp)]
    if not isinstance(inp, list):
        raise ValueError("input must be a string or an array of items")
    out = []
    for it in inp:
        if not isinstance(it, dict):
            raise ValueError("input items must be objects")
        typ = it.get("type", "message")
        if typ == "message" or (typ is None and "role" in it):
            out.append((str(it.get("role", "user")),
                        _parts_text(it.get("content"))))
        elif typ == "function_call":
            out.append(("assistant", "%s%s" % (it.get("name", ""),
                                               it.get("arguments", ""))))
        elif typ == "function_call_output":
            out.append(("tool", _parts_text(it.get("output"))))
        elif typ == "reasoning":
            out.append(("assistant", _parts_text(it.get("summary"))
                        + _parts_text(it.get("content"))))
        else:
            out.append(("", ""))
    return out


def anthropic_messages(obj):
    """An Anthropic body -> (role, text), the system prompt first."""
    msgs = obj.get("messages")
    if not isinstance(msgs, list):
        raise ValueError("messages: Field required")
    out = []
    system = obj.get("system")
    if system is not None:
        if not isinstance(system, (str, list)):
            raise ValueError("system must be a string or text blocks")
        out.append(("system", _parts_text(system)))
    for m in msgs:
        if not isinstance(m, dict):
            raise ValueError("messages must be objects")
        content = m.get("content", "")
        if isinstance(content, list):
            texts = []
            for b in content:
                if not isinstance(b, dict):
                    continue
                t = b.get("type")
                if t == "text":
                    texts.append(str(b.get("text", "")))
                elif t == "image":
                    src = b.get("source") or {}
                    texts.append(str(src.get("data", src.get("url", ""))))
                elif t == "tool_use":
                    texts.append("%s%s" % (b.get("name", ""),
                                           _compact(b.get("input", {}))))
                elif t == "tool_result":
                    texts.append(_parts_text(b.get("content")))
            content = "".join(texts)
        elif not isinstance(content, str):
            content = str(content)
        out.append((str(m.get("role", "user")), content))
    return out


def parse(path, obj, store=None):
    """A Responses or Anthropic body (a dict) -> dict with "kind"
    (responses, messages, count_tokens), "msgs", "tools", "text" (the
    rendered prompt), "max_tokens", "stream" and, for Responses,
    "previous" (the id continued), "store", "background".  With a store,
    previous_response_id must name one of its responses (else NotFound);
    without one (a router's look at the body) it is ignored."""
    tools = obj.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise ValueError("tools must be an array")
    out = {"tools": tools or [], "stream": bool(obj.get("stream", False))}
    if path.endswith("/v1/messages") or path.endswith("/count_tokens"):
        out["kind"] = ("count_tokens" if path.endswith("/count_tokens")
                       else "messages")
        out["msgs"] = anthropic_messages(obj)
        out["max_tokens"] = obj.get("max_tokens")
        if out["kind"] == "messages" and out["max_tokens"] is None:
            raise ValueError("max_tokens: Field required")
    else:
        out["kind"] = "responses"
        if "input" not in obj:
            raise ValueError("input: Field required")
        msgs = []
        ins = obj.get("instructions")
        if ins is not None:
            if not isinstance(ins, str):
                raise ValueError("instructions must be a string")
            msgs.append(("system", ins))
        prev = obj.get("previous_response_id")
        out["previous"] = prev
        if prev is not None and store is not None:
            msgs.extend(store.messages(prev))
        msgs.extend(responses_items(obj["input"]))
        out["msgs"] = msgs
        out["max_tokens"] = obj.get("max_output_tokens")
        out["store"] = obj.get("store", True) is not False
        out["background"] = bool(obj.get("background", False))
        out["request"] = obj
    if out["max_tokens"] is None:
        out["max_tokens"] = 128
    out["text"] = render(out["msgs"], out["tools"],
                         2 if obj.get("instructions") is not None else 1)
    return out


# ---------------------------------------------------------------------------
# the store of one instance


def new_id(prefix):
    return prefix + os.urandom(12).hex()


class Store:
    """The responses of one instance: id -> {"obj": the response object,
    "msgs": the messages its prompt was made of, then its output as an
    assistant message once done, "seq": the engine's sequence while it
    runs}.  Unbounded, as vLLM's in-memory store (messages share their
    strings with the request that made them)."""

    def __init__(self):
        self.items = {}

    def __contains__(self, rid):
        return rid in self.items

    def get(self, rid):
        e = self.items.get(rid)
        if e is None:
            raise NotFound(rid)
        return e

    def messages(self, rid):
        return self.get(rid)["msgs"]

    def put(self, rid, obj, msgs, seq=None):
        self.items[rid] = {"obj": obj, "msgs": list(msgs), "seq": seq}

    def finish(self, rid, obj, text):
        e = self.items.get(rid)
        if e is None:           # deleted while it ran
            return
        e["obj"] = obj
        e["seq"] = None
        if obj["status"] == "completed":
            e["msgs"].append(("assistant", text))

    def delete(self, rid):
        self.get(rid)
        del self.items[rid]


def not_found(rid):
    """vLLM's 404 for an id it does not hold, in OpenAI's error shape."""
    return {"error": {"message": "Response with id '%s' not found." % rid,
                      "type": "invalid_request_error", "param": None,
                      "code": None}}


def openai_error(message, typ="invalid_request_error"):
    return {"error": {"message": message, "type": typ, "param": None,
                      "code": None}}


def anthropic_error(message, typ="invalid_request_error"):
    return {"type": "error", "error": {"type": typ, "message": message}}


# ---------------------------------------------------------------------------
# response shapes


def _sse(event, obj):
    return "event: %s\ndata: %s\n\n" % (event, json.dumps(
        obj, separators=(",", ":")))


class ResponsesShape:
    """One Responses answer: the object, and its events for a stream."""

    def __init__(self, model, parsed, rid=None):
        self.model = model
        self.req = parsed.get("request", {})
        self.parsed = parsed
        self.id = rid or new_id("resp_")
        self.msg_id = new_id("msg_")
        self.created = int(time.time())
        self.seq_no = 0

    def usage(self, prompt, cached, generated):
        return {"input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": generated,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + generated}

    def item(self, text, status):
        return {"id": self.msg_id, "type": "message", "status": status,
                "role": "assistant",
                "content": [] if text is None else [
                    {"type": "output_text", "text": text, "annotations": [],
                     "logprobs": []}]}

    def obj(self, status, text=None, usage=None):
        r = self.req
        return {
            "id": self.id, "object": "response",
            "created_at": self.created, "status": status,
            "background": self.parsed.get("background", False),
            "error": None,
            "incomplete_details": ({"reason": "max_output_tokens"}
                                   if status == "incomplete" else None),
            "instructions": r.get("instructions"),
            "max_output_tokens": r.get("max_output_tokens"),
            "model": self.model,
            "output": ([] if text is None
                       else [self.item(text, "completed")]),
            "parallel_tool_calls": r.get("parallel_tool_calls", True),
            "previous_response_id": r.get("previous_response_id"),
            "reasoning": None,
            "store": self.parsed.get("store", True),
            "temperature": r.get("temperature", 1.0),
            "text": {"format": {"type": "text"}},
            "tool_choice": r.get("tool_choice", "auto"),
            "tools": r.get("tools") or [],
            "top_p": r.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": usage,
            "metadata": r.get("metadata") or {},
        }

    def _ev(self, typ, **kw):
        o = {"type": typ}
        o.update(kw)
        o["sequence_number"] = self.seq_no
        self.seq_no += 1
        return _sse(typ, o)

    def head(self):
        return "".join([
            self._ev("response.created", response=self.obj("in_progress")),
            self._ev("response.in_progress",
                     response=self.obj("in_progress")),
            self._ev("response.output_item.added", output_index=0,
                     item=self.item(None, "in_progress")),
            self._ev("response.content_part.added", item_id=self.msg_id,
                     output_index=0, content_index=0,
                     part={"type": "output_text", "text": "",
                           "annotations": []})])

    def delta(self, text):
        return self._ev("response.output_text.delta", item_id=self.msg_id,
                        output_index=0, content_index=0, delta=text,
                        logprobs=[])

    def tail(self, text, usage):
        part = {"type": "output_text", "text": text, "annotations": []}
        return "".join([
            self._ev("response.output_text.done", item_id=self.msg_id,
                     output_index=0, content_index=0, text=text,
                     logprobs=[]),
            self._ev("response.content_part.done", item_id=self.msg_id,
                     output_index=0, content_index=0, part=part),
            self._ev("response.output_item.done", output_index=0,
                     item=self.item(text, "completed")),
            self._ev("response.completed",
                     response=self.obj("completed", text, usage))])


class MessagesShape:
    """One Anthropic Messages answer: the object, and its events."""

    def __init__(self, model):
        self.model = model
        self.id = new_id("msg_")

    def usage(self, prompt, cached, generated):
        return {"input_tokens": prompt, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": cached,
                "output_tokens": generated}

    def obj(self, text, usage, stop="max_tokens"):
        return {"id": self.id, "type": "message", "role": "assistant",
                "model": self.model,
                "content": [] if text is None else [
                    {"type": "text", "text": text}],
                "stop_reason": stop, "stop_sequence": None, "usage": usage}

    def head(self, prompt):
        return "".join([
            _sse("message_start", {
                "type": "message_start",
                "message": self.obj(None, self.usage(prompt, 0, 1), None)}),
            _sse("content_block_start", {
                "type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            _sse("ping", {"type": "ping"})])

    def delta(self, text):
        return _sse("content_block_delta", {
            "type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}})

    def tail(self, text, usage):
        return "".join([
            _sse("content_block_stop", {"type": "content_block_stop",
                                        "index": 0}),
            _sse("message_delta", {
                "type": "message_delta",
                "delta": {"stop_reason": "max_tokens",
                          "stop_sequence": None},
                "usage": usage}),
            _sse("message_stop", {"type": "message_stop"})])
