#!/usr/bin/python3
"""Request streams for the routing benchmark, after SageMaker's use cases.

Every generator is deterministic for a seed and returns a Workload: a list
of Request objects (arrival time in model seconds for the open-loop mode,
session id for the closed-loop mode, HTTP path and body) plus the
parameters it used.  Lengths are in tokens of the simulator's
approximation (4 bytes of text = 1 token, see bench/sim/llmsim.py); the
text is ASCII pseudo-words, so characters = bytes.

Workloads (the defaults are in PARAMS; docs/benchmarks.md has a table):

  rag        long-context RAG: a library of documents of several thousand
             tokens, picked Zipf-popular, with a question appended (after
             SGLang's generated-shared-prefix and inference-perf's
             shared_prefix, with documents instead of system prompts).
             A share of requests goes to SageMaker's native /invocations
             with a {"inputs": ..., "parameters": ...} body.
  chat       multi-turn chat (after vLLM's multi-turn benchmark): a system
             prompt common to all, a per-conversation context, then turns;
             each turn's prompt is the whole history so far.
  templated  templated assistants: a few long system prompts (Zipf-popular)
             and a short user message.
  code       code completion on /v1/completions: files of a repository,
             completed at a cursor that moves through the file while the
             file is edited between requests.
  short      short variable-length chat (ShareGPT-like lengths), little
             sharing.
  lora       LoRA adapters of one base model: 8 adapters, Zipf-popular,
             each served by 2 of 4 instances (adapter_hosts()), each with
             3 system prompts of its own; the adapter is the body's
             "model".  llmsim --models lora_models() answers 404 for an
             adapter an instance does not serve.
  tenants    a few long system prompts (2,000-6,000 tokens, longer than
             prefix_aware's default length=4096 characters), each shared by
             many users, every user in a multi-turn conversation whose
             history grows (vLLM's multi-turn generator: 12..18 turns).
             A key over the first 4096 characters sees one prefix per
             tenant, while the reuse is per user.
  agentic    tool-calling agents: an app's long system prompt (its tool
             schemas), a task, then turns; each turn appends the model's
             tool call and the tool's result (1,000-8,000 tokens) to the
             history, which grows to 64,000-128,000 tokens over 5-30 tool
             results; agents start in bursts (several at once), many run
             together.  Needs an engine cache larger than one context
             (run.py gives it WORKLOAD_KV_BLOCKS["agentic"] blocks).
  prio       priority bands (issue 45): noisy_equal's 8 tenants, a seeded
             10 % of the requests in a high band; run.py sends each
             request's band as X-Bench-Priority (1 high, 0 low) and the
             trace records it ("band").  bench/prio_report.py.

Client styles.  Real fleets mix SDKs that serialise the same request
differently (key order, whitespace).  Each session or user is given a
style: "py" (messages first, ", " and ": " separators, like openai-python
with the standard json module) or "js" (model and options first, compact
separators, like JavaScript's JSON.stringify); PARAMS[...]["js_share"] is
the share of the latter.  Raw-byte keys (HAProxy, nginx hash) see two
different bodies for the same prompt; character keys on the message text
do not.

Arrivals: open loop, Poisson at "rate" requests per model second (chat:
sessions start as a Poisson process and turns follow at exponential think
gaps, so that the overall rate is "rate"); or closed loop (run.py): C
workers, each sending a session's requests one after the other.

    /usr/bin/python3 bench/workloads.py rag --n 200 --describe
"""

import argparse
import bisect
import itertools
import json
import math
import os
import random

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
BYTES_PER_TOKEN = 4

PARAMS = {
    "rag": dict(
        n=600, rate=16.0, seed=1,
        docs=64,                 # library size
        doc_tokens=(4000, 0.35, 1500, 8000),   # lognormal median, sigma, clip
        zipf=1.0,                # document popularity exponent
        system_tokens=80,        # shared instruction before the document
        question_tokens=(20, 80),
        output_tokens=(64, 160),
        invocations_share=0.1,   # SageMaker native API share
        js_share=0.5,
    ),
    "chat": dict(
        n=600, rate=16.0, seed=2,
        system_tokens=500,       # common to every conversation
        context_tokens=(1000, 0.5, 300, 3000),  # per conversation, lognormal
        turns=(4, 8),            # per conversation (vLLM: 12..18, shortened)
        user_tokens=(120, 160),
        answer_tokens=(80, 120),
        think=3.0,               # mean model seconds between two turns
        js_share=0.5,
    ),
    "templated": dict(
        n=600, rate=16.0, seed=3,
        templates=8,
        system_tokens=(1500, 3000),
        zipf=1.2,
        user_tokens=(50, 0.8, 10, 400),   # lognormal median, sigma, clip
        output_tokens=(64, 200),
        js_share=0.5,
    ),
    "code": dict(
        n=600, rate=16.0, seed=4,
        files=40,
        file_tokens=(800, 4000),
        zipf=1.0,
        header_tokens=60,        # FIM instruction / repository header
        typing=0.8,              # chance the cursor continues where it was
        edit_tokens=(4, 40),     # text typed at the cursor between requests
        output_tokens=(16, 64),
    ),
    "short": dict(
        n=600, rate=16.0, seed=5,
        system_variants=3,
        system_tokens=30,
        no_system_share=0.3,
        prompt_tokens=(150, 1.0, 8, 1500),     # lognormal (ShareGPT-like)
        output_tokens=(150, 0.8, 8, 500),
        js_share=0.5,
    ),
    # mostly unique prompts of very uneven length (issue 43, item 2: a
    # production-like trace where 87 % of requests share no prefix with an
    # earlier one, input median about 5,500 tokens, P90 about 70,000;
    # output median about 170 tokens; about 15 requests a second on the
    # trace's 4 instances): lognormal input lengths, capped below the
    # simulator's max-model-len (131,072; the trace's longest, about
    # 270,000, would not fit), and a share of follow-ups that extend a
    # recent request.  1.3 a second: about 0.7 of what 4 simulated H100s
    # serve of these prompts (round robin saturated served 1.9 a second;
    # at 15 a second every router's TTFT P50 was over a minute)
    "uneven": dict(
        n=400, rate=1.3, seed=12,
        prompt_tokens=(5500, 1.99, 100, 120000),   # lognormal: median,
                                                  # sigma, lo, hi
        output_tokens=(170, 0.9, 8, 2000),
        follow_share=0.13,        # extend one of the last `recent` requests
        recent=50,
        follow_tokens=(300, 1.0, 20, 4000),
        js_share=0.5,
    ),
    "tenants": dict(
        n=600, rate=16.0, seed=6,
        tenants=4,               # system prompts, each shared by many users
        system_tokens=(2000, 6000),   # uniform per tenant
        zipf=0.8,                # tenant popularity (users per tenant)
        turns=(12, 18),          # per user (vLLM's multi-turn generator)
        user_tokens=(120, 160),
        answer_tokens=(80, 120),
        think=(1.0, 1.5),        # model seconds between two turns of a
                                 # user: fixed (reading) + exponential mean
        js_share=0.5,
    ),
    "noisy": dict(
        n=900, rate=16.0, seed=9,
        tenants=8,               # each with a system prompt of its own
        noisy=4.0,               # tenant 0's rate over each other one's
        system_tokens=3000,
        user_tokens=(100, 200),
        output_tokens=(200, 400),
        js_share=0.5,
    ),
    # the same tenants, all at one rate: the noisy tenant's baseline
    "noisy_equal": dict(
        n=900, rate=16.0, seed=9,
        tenants=8, noisy=1.0, system_tokens=3000,
        user_tokens=(100, 200), output_tokens=(200, 400), js_share=0.5,
    ),
    # the quiet tenants alone, tenant 0 silent: what isolation could give
    # them at their own load (run at noisy's rate x 7 / 11 and n x 7 / 11)
    "noisy_quiet": dict(
        n=900, rate=16.0, seed=9,
        tenants=8, noisy=0.0, system_tokens=3000,
        user_tokens=(100, 200), output_tokens=(200, 400), js_share=0.5,
    ),
    # issue 45's priority measurement: noisy_equal's tenants, a seeded
    # high_share of the requests (whatever their tenant) in a high band,
    # sent with X-Bench-Priority: 1 (the others 0).  The same stream at
    # two rates: --rate 23 (about 0.8 of what the default serves of it,
    # the baseline) and --rate 44 (overload)
    "prio": dict(
        n=900, rate=23.0, seed=9,
        tenants=8, noisy=1.0, system_tokens=3000,
        user_tokens=(100, 200), output_tokens=(200, 400), js_share=0.5,
        high_share=0.1,          # requests in the high band
    ),
    "agentic": dict(
        n=400, rate=1.0, seed=8,
        apps=4,                  # system prompts (tool schemas), shared
        system_tokens=(2000, 4000),   # uniform per app
        zipf=0.8,                # app popularity
        task_tokens=(100, 400),  # the user's task, first message
        context_tokens=(64000, 128000),  # history an agent grows to
        tool_results=(5, 30),    # tool results per agent (turns - 1)
        result_tokens=(1000, 8000),   # one tool result
        call_tokens=(50, 200),   # the model's tool call (max_tokens)
        burst=(1, 8),            # agents starting together
        burst_spread=0.5,        # model seconds over which a burst starts
        gap=(2.0, 2.0),          # between two turns: fixed (the model's
                                 # answer) + exponential mean (the tool)
        js_share=0.5,
        shape="chat",            # chat | responses | messages | stored:
                                 # the API the agents speak (SHAPES)
    ),
    "lora": dict(
        n=600, rate=16.0, seed=7,
        adapters=8,              # LoRA adapters of one base model
        instances=4,             # each adapter on 2 of them (ADAPTER_HOSTS)
        zipf=1.0,                # adapter popularity
        prompts=3,               # system prompts per adapter
        prompt_zipf=1.0,         # their popularity within the adapter
        system_tokens=(1000, 2500),
        user_tokens=(50, 0.8, 10, 400),   # lognormal median, sigma, clip
        output_tokens=(64, 160),
        js_share=0.5,
    ),
}

DESCRIPTIONS = {
    "rag": "long-context RAG: Zipf-popular documents of ~4000 tokens + a question",
    "chat": "multi-turn chat: 500-token common system prompt, ~1000-token "
            "conversation context, 4-8 turns whose history grows",
    "templated": "templated assistants: 8 system prompts of 1500-3000 tokens, "
                 "short user messages",
    "code": "code completion: 40 files edited and completed at a moving cursor",
    "short": "short variable-length chat, ShareGPT-like lengths, little sharing",
    "tenants": "multi-tenant chat: 4 system prompts of 2000-6000 tokens shared "
               "by many users, each user 12-18 turns whose history grows",
    "lora": "LoRA adapters: 8 adapters (Zipf-popular), each on 2 of 4 "
            "instances, 3 system prompts of 1000-2500 tokens per adapter",
    "uneven": "mostly unique prompts of very uneven length: lognormal "
              "input (median 5,500 tokens, P90 about 70,000, at most "
              "120,000), output median 170 tokens, 13 % follow-ups of a "
              "recent request (issue 43)",
    "noisy": "a noisy tenant: 8 tenants with system prompts of 3000 tokens "
             "of their own, single questions of 100-200 tokens, answers of "
             "200-400; tenant 0 sends noisy times each other one's rate "
             "(issue 45; group = tenant)",
    "noisy_equal": "the noisy tenant's baseline: the same 8 tenants at one "
                   "rate",
    "noisy_quiet": "the noisy tenant's quiet tenants alone (tenant 0 "
                   "silent): their TTFT with perfect isolation",
    "prio": "priority bands: the noisy tenant's baseline tenants (8 at "
            "one rate), a seeded 10 % of requests high (X-Bench-Priority: "
            "1, the others 0; issue 45; run at --rate 23 and 44)",
    "agentic": "tool-calling agents: 4 apps' tool prompts of 2000-4000 "
               "tokens, each agent's history growing by tool results of "
               "1000-8000 tokens to 64k-128k tokens over 5-30 turns, "
               "agents starting in bursts",
}


class Request:
    __slots__ = ("t", "session", "turn", "path", "body", "group", "max_tokens",
                 "style", "priority")

    def __init__(self, t, session, turn, path, body, group, max_tokens, style,
                 priority=None):
        self.t = t
        self.session = session
        self.turn = turn
        self.path = path
        self.body = body
        self.group = group
        self.max_tokens = max_tokens
        self.style = style
        # the band run.py sends as X-Bench-Priority (None: no header)
        self.priority = priority


class Workload:
    def __init__(self, name, params, requests):
        self.name = name
        self.params = params
        self.requests = requests

    def describe(self):
        n = len(self.requests)
        span = self.requests[-1].t - self.requests[0].t if n > 1 else 0
        sizes = sorted(len(r.body) for r in self.requests)
        groups = len(set(r.group for r in self.requests))
        sessions = len(set(r.session for r in self.requests))
        paths = {}
        for r in self.requests:
            paths[r.path] = paths.get(r.path, 0) + 1
        return ("%s: %d requests over %.1f model s (%.2f/s), %d sessions, "
                "%d prefix groups, body bytes p50 %d max %d, paths %s"
                % (self.name, n, span, (n - 1) / span if span else 0, sessions,
                   groups, sizes[n // 2], sizes[-1], paths))


# ---------------------------------------------------------------------------
# text

_SYL = ("ka", "lo", "ri", "ten", "mo", "sa", "vel", "dor", "in", "ux", "pra",
        "ne", "go", "tur", "li", "ba", "qua", "sen", "fi", "rom", "ed", "al",
        "cor", "pi", "ste", "an", "ver", "ho", "ma", "zu", "ol", "tri")


def _vocab(seed=12345, size=4096):
    rng = random.Random(seed)
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYL) for _ in range(rng.randint(1, 4))))
    return sorted(words)


VOCAB = _vocab()
_CODE_WORDS = ("def", "return", "self", "if", "else", "for", "in", "import",
               "class", "None", "True", "value", "result", "data", "index",
               "config", "(", ")", ":", "=", "+", "[", "]", ",", ".")


def text(rng, tokens, vocab=VOCAB, sep=" "):
    """ASCII pseudo-text of about tokens x 4 bytes."""
    nbytes = max(1, int(tokens * BYTES_PER_TOKEN))
    out = []
    size = 0
    while size < nbytes:
        chunk = sep.join(rng.choices(vocab, k=64))
        out.append(chunk)
        size += len(chunk) + 1
    s = sep.join(out)[:nbytes]
    return s


def code_text(rng, tokens):
    lines = []
    size = 0
    nbytes = int(tokens * BYTES_PER_TOKEN)
    while size < nbytes:
        indent = "    " * rng.randint(0, 3)
        line = indent + " ".join(rng.choices(VOCAB + list(_CODE_WORDS) * 40,
                                             k=rng.randint(3, 10)))
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:nbytes]


def lognormal(rng, median, sigma, lo, hi):
    return int(min(hi, max(lo, rng.lognormvariate(math.log(median), sigma))))


class Zipf:
    def __init__(self, n, s, rng):
        w = [1.0 / (i + 1) ** s for i in range(n)]
        tot = sum(w)
        self.cdf = list(itertools.accumulate(x / tot for x in w))
        self.rng = rng
        # popularity rank -> item, so that item 0 is not always the top one
        self.perm = list(range(n))
        rng.shuffle(self.perm)

    def __call__(self):
        i = bisect.bisect_left(self.cdf, self.rng.random())
        return self.perm[min(i, len(self.perm) - 1)]


# ---------------------------------------------------------------------------
# request bodies


def chat_body(messages, max_tokens, style, stream=True, tools=None):
    opts = {"max_tokens": max_tokens, "stream": stream}
    if stream:
        opts["stream_options"] = {"include_usage": True}
    if tools:
        # last, after the messages, as the SDKs send them
        opts["tools"] = tools
    if style == "js":
        obj = {"model": MODEL, **opts, "messages": messages}
        return json.dumps(obj, separators=(",", ":")).encode()
    obj = {"messages": messages, "model": MODEL, **opts}
    return json.dumps(obj).encode()


# the agentic workload's request shapes (issue 44): the same conversation
# as chat completions, as Responses items (store false: the client sends
# the whole history, as Codex-style clients do), as Anthropic messages, or
# as a stored Responses conversation (store true: each turn sends only
# the new tool output and previous_response_id, PREV_PLACEHOLDER, which
# run.py replaces with the id of the session's last answer)
SHAPES = ("chat", "responses", "messages", "stored")
PREV_PLACEHOLDER = "@PREV@"
SHAPE_PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses",
               "messages": "/v1/messages", "stored": "/v1/responses"}


def _ordered(obj, style, first):
    """py-style clients send the conversation first, js-style ones the
    model and options first (compact JSON): both orders are in the runs."""
    if style == "js":
        return json.dumps(obj, separators=(",", ":")).encode()
    head = {k: obj[k] for k in first if k in obj}
    head.update({k: v for k, v in obj.items() if k not in head})
    return json.dumps(head).encode()


def responses_body(system, items, max_tokens, style, tools=None,
                   store=False, previous=None):
    obj = {"model": MODEL, "max_output_tokens": max_tokens, "stream": True,
           "store": store}
    if previous:
        obj["previous_response_id"] = previous
    elif system is not None:
        obj["instructions"] = system
    if tools:
        obj["tools"] = [dict(t["function"], type="function") for t in tools]
    obj["input"] = items
    return _ordered(obj, style, ("input", "instructions"))


def messages_body(system, messages, max_tokens, style, tools=None):
    obj = {"model": MODEL, "max_tokens": max_tokens, "stream": True,
           "system": system}
    if tools:
        obj["tools"] = [{"name": t["function"]["name"],
                         "description": t["function"]["description"],
                         "input_schema": t["function"]["parameters"]}
                        for t in tools]
    obj["messages"] = messages
    return _ordered(obj, style, ("messages", "system"))


def completion_body(prompt, max_tokens, stream=True):
    obj = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens,
           "stream": stream, "temperature": 0}
    if stream:
        obj["stream_options"] = {"include_usage": True}
    return json.dumps(obj).encode()


def invocations_body(prompt, max_tokens, stream=True):
    obj = {"inputs": prompt,
           "parameters": {"max_new_tokens": max_tokens, "stream": stream}}
    return json.dumps(obj).encode()


def poisson_times(rng, n, rate):
    t = 0.0
    out = []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(t)
    return out


def _style(rng, p):
    return "js" if rng.random() < p.get("js_share", 0) else "py"


# ---------------------------------------------------------------------------
# generators


def gen_rag(p):
    rng = random.Random(p["seed"])
    system = ("You answer questions using only the document below. Cite the "
              "section you used. " + text(rng, p["system_tokens"]))
    docs = []
    for i in range(p["docs"]):
        m, s, lo, hi = p["doc_tokens"]
        docs.append("Document %d.\n%s" % (i, text(rng, lognormal(rng, m, s, lo, hi))))
    pick = Zipf(p["docs"], p["zipf"], rng)
    times = poisson_times(rng, p["n"], p["rate"])
    reqs = []
    for i, t in enumerate(times):
        d = pick()
        q = text(rng, rng.randint(*p["question_tokens"])) + "?"
        out = rng.randint(*p["output_tokens"])
        user = "%s\n\nQuestion: %s" % (docs[d], q)
        if rng.random() < p["invocations_share"]:
            prompt = "%s\n\n%s\n\nAnswer:" % (system, user)
            body = invocations_body(prompt, out)
            reqs.append(Request(t, i, 0, "/invocations", body, "doc%d" % d, out,
                                "raw"))
        else:
            style = _style(rng, p)
            msgs = [{"role": "system", "content": system},
                    {"role": "user", "content": user}]
            reqs.append(Request(t, i, 0, "/v1/chat/completions",
                                chat_body(msgs, out, style), "doc%d" % d, out,
                                style))
    return reqs


def gen_chat(p):
    rng = random.Random(p["seed"])
    system = "You are a helpful assistant. " + text(rng, p["system_tokens"])
    mean_turns = sum(p["turns"]) / 2.0
    session_rate = p["rate"] / mean_turns
    think = p["think"]
    horizon = p["n"] / p["rate"]
    reqs = []
    t0 = 0.0
    sid = 0
    while t0 < horizon or len(reqs) < p["n"]:
        t0 += rng.expovariate(session_rate)
        style = _style(rng, p)
        m, s, lo, hi = p["context_tokens"]
        ctx = "Conversation %d context:\n%s" % (sid, text(rng, lognormal(rng, m, s, lo, hi)))
        msgs = [{"role": "system", "content": system},
                {"role": "user", "content": ctx}]
        msgs.append({"role": "assistant", "content": text(rng, 30)})
        t = t0
        for turn in range(rng.randint(*p["turns"])):
            msgs = msgs + [{"role": "user",
                            "content": text(rng, rng.randint(*p["user_tokens"]))}]
            out = rng.randint(*p["answer_tokens"])
            reqs.append(Request(t, sid, turn, "/v1/chat/completions",
                                chat_body(msgs, out, style), "conv%d" % sid,
                                out, style))
            # the answer joins the history (the simulator's own answer text
            # differs, so these tokens are computed once more next turn)
            msgs = msgs + [{"role": "assistant", "content": text(rng, out)}]
            t += rng.expovariate(1.0 / think)
        sid += 1
    reqs.sort(key=lambda r: r.t)
    return reqs[:p["n"]]


def gen_templated(p):
    rng = random.Random(p["seed"])
    systems = ["Template %d. You are assistant #%d for ACME. %s"
               % (i, i, text(rng, rng.randint(*p["system_tokens"])))
               for i in range(p["templates"])]
    pick = Zipf(p["templates"], p["zipf"], rng)
    times = poisson_times(rng, p["n"], p["rate"])
    reqs = []
    for i, t in enumerate(times):
        k = pick()
        style = _style(rng, p)
        m, s, lo, hi = p["user_tokens"]
        msgs = [{"role": "system", "content": systems[k]},
                {"role": "user", "content": text(rng, lognormal(rng, m, s, lo, hi))}]
        out = rng.randint(*p["output_tokens"])
        reqs.append(Request(t, i, 0, "/v1/chat/completions",
                            chat_body(msgs, out, style), "tpl%d" % k, out, style))
    return reqs


def gen_code(p):
    rng = random.Random(p["seed"])
    files = []
    for i in range(p["files"]):
        body = code_text(rng, rng.randint(*p["file_tokens"]))
        files.append({"name": "src/module_%02d.py" % i, "text": body,
                      "cursor": rng.randint(len(body) // 2, len(body))})
    pick = Zipf(p["files"], p["zipf"], rng)
    header = ("<|fim_header|> repository acme/service, language python. "
              + text(rng, p["header_tokens"]))
    times = poisson_times(rng, p["n"], p["rate"])
    reqs = []
    for i, t in enumerate(times):
        k = pick()
        f = files[k]
        txt = f["text"]
        if rng.random() >= p["typing"]:
            f["cursor"] = rng.randint(len(txt) // 4, len(txt))
        c = f["cursor"]
        prompt = ("%s\n# file: %s\n<|fim_prefix|>%s<|fim_suffix|>%s<|fim_middle|>"
                  % (header, f["name"], txt[:c], txt[c:]))
        out = rng.randint(*p["output_tokens"])
        reqs.append(Request(t, i, 0, "/v1/completions",
                            completion_body(prompt, out), "file%d" % k, out, "py"))
        # the user accepts or types some text at the cursor
        typed = code_text(rng, rng.randint(*p["edit_tokens"]))
        f["text"] = txt[:c] + typed + txt[c:]
        f["cursor"] = c + len(typed)
    return reqs


def gen_short(p):
    rng = random.Random(p["seed"])
    systems = ["You are a friendly assistant, variant %d. %s"
               % (i, text(rng, p["system_tokens"]))
               for i in range(p["system_variants"])]
    times = poisson_times(rng, p["n"], p["rate"])
    reqs = []
    for i, t in enumerate(times):
        style = _style(rng, p)
        msgs = []
        g = "none"
        if rng.random() >= p["no_system_share"]:
            k = rng.randrange(len(systems))
            msgs.append({"role": "system", "content": systems[k]})
            g = "sys%d" % k
        m, s, lo, hi = p["prompt_tokens"]
        msgs.append({"role": "user", "content": text(rng, lognormal(rng, m, s, lo, hi))})
        m, s, lo, hi = p["output_tokens"]
        out = lognormal(rng, m, s, lo, hi)
        reqs.append(Request(t, i, 0, "/v1/chat/completions",
                            chat_body(msgs, out, style), g, out, style))
    return reqs


def gen_tenants(p):
    """Users of a few tenants, each user a multi-turn conversation.

    Tenant k has a system prompt of system_tokens (uniform); users pick a
    tenant Zipf-popular.  A user's turn i sends [system, user 1, answer 1,
    ..., user i]: the history grows by the previous answer and a new user
    turn (user_tokens, answer_tokens), as vLLM's benchmarks/multi_turn
    generator does.  Turns follow at think[0] + exp(think[1]) model
    seconds.  group = tenant, session = user.

    The stream is a window of a steady state: users arrive as a Poisson
    process at rate / mean turns from one mean conversation length before
    t = 0, and only requests at t >= 0 are sent, so that the offered load
    is "rate" from the start and histories of every depth are present.  A
    user who started before t = 0 sends a long history first that no cache
    has seen (as after a restart); every strategy sees the same stream."""
    rng = random.Random(p["seed"])
    systems = []
    for k in range(p["tenants"]):
        systems.append("Tenant %d. You are the support assistant of tenant "
                       "%d; follow its policies below.\n%s"
                       % (k, k, text(rng, rng.randint(*p["system_tokens"]))))
    pick = Zipf(p["tenants"], p["zipf"], rng)
    mean_turns = sum(p["turns"]) / 2.0
    user_rate = p["rate"] / mean_turns
    fixed, think = p["think"]
    horizon = p["n"] / p["rate"]
    reqs = []
    t0 = -mean_turns * (fixed + think)
    uid = 0
    while t0 < horizon or len(reqs) < p["n"]:
        t0 += rng.expovariate(user_rate)
        k = pick()
        style = _style(rng, p)
        msgs = [{"role": "system", "content": systems[k]}]
        t = t0
        for turn in range(rng.randint(*p["turns"])):
            msgs = msgs + [{"role": "user", "content": "(user %d) %s" % (
                uid, text(rng, rng.randint(*p["user_tokens"])))}]
            out = rng.randint(*p["answer_tokens"])
            if t >= 0:
                reqs.append(Request(t, uid, turn, "/v1/chat/completions",
                                    chat_body(msgs, out, style),
                                    "tenant%d" % k, out, style))
            msgs = msgs + [{"role": "assistant", "content": text(rng, out)}]
            t += fixed + rng.expovariate(1.0 / think)
        uid += 1
    reqs.sort(key=lambda r: r.t)
    return reqs[:p["n"]]




def agent_results(rng, p, base):
    """Sizes (tokens) of one agent's tool results: a target context drawn
    in context_tokens, a count in tool_results that can reach it with
    results in result_tokens, sizes drawn in result_tokens and scaled to
    the target less room for the tool calls, then clipped to
    result_tokens again (so the context ends a few per cent under the
    target, or at the bound a count allows)."""
    lo, hi = p["result_tokens"]
    target = rng.randint(*p["context_tokens"]) - base
    kmin, kmax = p["tool_results"]
    k_lo = max(kmin, -(-target // hi))
    k_hi = min(kmax, max(k_lo, target // lo))
    k = rng.randint(min(k_lo, k_hi), k_hi)
    # room for the tool calls and the messages' headers (so that the
    # context stays under the target, and under max-model-len)
    budget = target - k * (p["call_tokens"][1] + 12)
    sizes = [rng.uniform(lo, hi) for _ in range(k)]
    f = budget / sum(sizes)
    return [int(min(hi, max(lo, x * f))) for x in sizes]


def gen_noisy(p):
    """Tenants with a system prompt each; tenant 0 sends `noisy` times the
    rate of each of the others (noisy=1: all equal), so that each quiet
    tenant sends rate / (tenants - 1 + noisy) requests a second, Poisson.
    Each request is the tenant's system prompt and one new question: what
    a tenant's users share is its prompt.  group = "tenant<k>"."""
    rng = random.Random(p["seed"])
    k = p["tenants"]
    systems = ["Tenant %d. You answer for tenant %d only.\n%s"
               % (i, i, text(rng, p["system_tokens"])) for i in range(k)]
    share = [p["noisy"]] + [1.0] * (k - 1)
    total = sum(share)
    reqs = []
    for i in range(k):
        if share[i] <= 0:
            continue
        n = max(1, int(round(p["n"] * share[i] / total)))
        rate = p["rate"] * share[i] / total
        for j, t in enumerate(poisson_times(rng, n, rate)):
            style = _style(rng, p)
            out = rng.randint(*p["output_tokens"])
            msgs = [{"role": "system", "content": systems[i]},
                    {"role": "user", "content": "(question %d.%d) %s" % (
                        i, j, text(rng, rng.randint(*p["user_tokens"])))}]
            reqs.append(Request(t, i * 100000 + j, 0, "/v1/chat/completions",
                                chat_body(msgs, out, style),
                                "tenant%d" % i, out, style))
    reqs.sort(key=lambda r: r.t)
    return reqs[:p["n"]]


def gen_prio(p):
    """gen_noisy's stream (noisy=1: every tenant at one rate) where a
    seeded high_share of the requests, drawn over the whole stream
    whatever their tenant, are in the high band (priority 1, the others
    0).  The draw has a generator of its own, so the stream is
    noisy_equal's of the same seed and the same requests are high at
    any rate."""
    reqs = gen_noisy(p)
    rng = random.Random("prio-%d" % p["seed"])
    k = int(round(p["high_share"] * len(reqs)))
    high = set(rng.sample(range(len(reqs)), k))
    for i, r in enumerate(reqs):
        r.priority = 1 if i in high else 0
    return reqs


def gen_uneven(p):
    """Mostly unique prompts of very uneven length (issue 43, item 2).
    Each request is a new single-message conversation of a lognormal
    length, or (follow_share) a follow-up of one of the last `recent`
    requests: its messages, an answer and a new question, so that it
    shares that request's whole prompt.  group = the conversation."""
    rng = random.Random(p["seed"])
    times = poisson_times(rng, p["n"], p["rate"])
    reqs = []
    convs = []                    # (messages, group) of earlier requests
    for i, t in enumerate(times):
        style = _style(rng, p)
        out = lognormal(rng, *p["output_tokens"])
        if convs and rng.random() < p["follow_share"]:
            prev, g = rng.choice(convs[-p["recent"]:])
            msgs = prev + [
                {"role": "assistant", "content": text(rng, 60)},
                {"role": "user",
                 "content": text(rng, lognormal(rng, *p["follow_tokens"]))}]
            turn = 1
        else:
            g = "u%d" % i
            msgs = [{"role": "user", "content": "(request %d) %s" % (
                i, text(rng, lognormal(rng, *p["prompt_tokens"])))}]
            turn = 0
        convs.append((msgs, g))
        reqs.append(Request(t, i, turn, "/v1/chat/completions",
                            chat_body(msgs, out, style), g, out, style))
    return reqs


def gen_agentic(p):
    """Tool-calling agents (after the agent traces that 2025-26 traffic
    moved to: a long tool-schema system prompt, a task, then a loop of
    tool call and tool result, each turn sending the whole history).

    Agent a of app k sends turn 0 = [system_k, task]; after turn j it
    appends the model's tool call (call_tokens, the turn's max_tokens) and
    the tool's result (agent_results()), and sends turn j + 1, gap[0] +
    exp(gap[1]) model seconds later.  Agents start in bursts of burst
    agents (uniform), spread over burst_spread seconds, bursts arriving as
    a Poisson process so that the requests arrive at "rate" on average.
    As in tenants, the stream is a window of a steady state: agents start
    from one mean agent's length before t = 0 and only requests at t >= 0
    are sent (an agent that started before t = 0 first sends a history no
    cache has seen, as after a restart).  group = agent's app,
    session = agent.

    BENCH_AGENTIC_TOOLS=app|shared: each request also has "tools" (8
    function tools, about 600 tokens): each app's own, or one set shared
    by all apps (issue 44: tools are part of the chat key); drawn from a
    random stream of their own, so the rest of the workload is the same.

    shape (issue 44): the API the agents speak, the same conversations
    and arrival times in each (SHAPES): chat completions; Responses items
    (the task a user message, each tool call a function_call, each result
    a function_call_output, the system prompt in "instructions"); Anthropic
    messages (system, tool_use and tool_result blocks); or "stored": a
    Responses conversation kept by the engine (store true), whose turns
    after an agent's first sent one carry only the new tool output and
    previous_response_id (the function call is what the engine answered,
    in its store: in llmsim, its own generated text)."""
    shape = p.get("shape", "chat")
    if shape not in SHAPES:
        raise ValueError("agentic: shape %r is not one of %s"
                         % (shape, ", ".join(SHAPES)))
    tools_mode = os.environ.get("BENCH_AGENTIC_TOOLS", "none")
    trng = random.Random(p["seed"] + 7919)

    def toolset(tag):
        return [{"type": "function", "function": {
            "name": "%s_tool_%d" % (tag, i),
            "description": text(trng, 40),
            "parameters": {"type": "object", "properties": {
                "arg%d" % j: {"type": "string", "description": text(trng, 10)}
                for j in range(3)}, "required": ["arg0"]}}}
            for i in range(8)]

    tools = [None] * p["apps"]
    if tools_mode == "shared":
        tools = [toolset("shared")] * p["apps"]
    elif tools_mode == "app":
        tools = [toolset("app%d" % k) for k in range(p["apps"])]
    rng = random.Random(p["seed"])
    systems = []
    for k in range(p["apps"]):
        systems.append("App %d. You are an agent with the tools below; call "
                       "one tool per turn as JSON.\n%s"
                       % (k, text(rng, rng.randint(*p["system_tokens"]))))
    pick = Zipf(p["apps"], p["zipf"], rng)
    kmin, kmax = p["tool_results"]
    lo, hi = p["result_tokens"]
    mid = sum(p["context_tokens"]) / 2.0
    mean_turns = 1 + (max(kmin, math.ceil(mid / hi))
                      + min(kmax, max(kmin, mid // lo))) / 2.0
    fixed, think = p["gap"]
    mean_burst = sum(p["burst"]) / 2.0
    burst_rate = p["rate"] / mean_turns / mean_burst
    horizon = p["n"] / p["rate"]
    reqs = []
    t0 = -mean_turns * (fixed + think)
    aid = 0
    while t0 < horizon or len(reqs) < p["n"]:
        t0 += rng.expovariate(burst_rate)
        for _ in range(rng.randint(*p["burst"])):
            k = pick()
            style = _style(rng, p)
            task = "(agent %d) %s" % (aid, text(rng, rng.randint(
                *p["task_tokens"])))
            msgs = [{"role": "system", "content": systems[k]},
                    {"role": "user", "content": task}]
            # the same conversation as Responses items and Anthropic
            # messages
            items = [{"type": "message", "role": "user", "content": task}]
            amsgs = [{"role": "user", "content": task}]
            sent = 0            # turns of this agent sent (stored: the
                                # first one carries the whole history)
            base = (len(systems[k]) + len(task)) // BYTES_PER_TOKEN
            results = agent_results(rng, p, base)
            t = t0 + rng.uniform(0, p["burst_spread"])
            for turn in range(len(results) + 1):
                out = rng.randint(*p["call_tokens"])
                if t >= 0:
                    if shape == "chat":
                        body = chat_body(msgs, out, style, tools=tools[k])
                    elif shape == "responses":
                        body = responses_body(systems[k], items, out, style,
                                              tools[k])
                    elif shape == "messages":
                        body = messages_body(systems[k], amsgs, out, style,
                                             tools[k])
                    elif sent == 0:
                        body = responses_body(systems[k], items, out, style,
                                              tools[k], store=True)
                    else:
                        body = responses_body(None, items[-1:], out, style,
                                              tools[k], store=True,
                                              previous=PREV_PLACEHOLDER)
                    reqs.append(Request(t, aid, turn, SHAPE_PATHS[shape],
                                        body, "app%d" % k, out, style))
                    sent += 1
                if turn == len(results):
                    break
                tool = rng.randrange(16)
                args = text(rng, max(1, out - 12))
                call = '{"tool": "t%d", "args": "%s"}' % (tool, args)
                result = text(rng, results[turn])
                msgs = msgs + [
                    {"role": "assistant", "content": call},
                    {"role": "tool", "content": result}]
                cid = "call_%d_%d" % (aid, turn)
                items = items + [
                    {"type": "function_call", "call_id": cid,
                     "name": "t%d" % tool,
                     "arguments": '{"args": "%s"}' % args},
                    {"type": "function_call_output", "call_id": cid,
                     "output": result}]
                amsgs = amsgs + [
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": cid, "name": "t%d" % tool,
                         "input": {"args": args}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": cid,
                         "content": result}]}]
                t += fixed + rng.expovariate(1.0 / think)
            aid += 1
    reqs.sort(key=lambda r: r.t)
    return reqs[:p["n"]]


def adapter_name(k):
    return "lora-%d" % k


def adapter_hosts(k, instances=4):
    """The two instances (indices) that serve adapter k: neighbours for the
    first half, instances two apart for the second, so that every instance
    serves as many adapters (four of eight on four instances)."""
    half = k // instances
    i = k % instances
    return sorted({i, (i + 1 + half) % instances})


def lora_models(adapters=8, instances=4):
    """llmsim --models: the adapters of each instance."""
    per = [[] for _ in range(instances)]
    for k in range(adapters):
        for i in adapter_hosts(k, instances):
            per[i].append(adapter_name(k))
    return ";".join(",".join(x) for x in per)


def gen_lora(p):
    """Requests for LoRA adapters of one base model: the adapter is the
    body's "model" (as vLLM --enable-lora serves them); each adapter has
    its own system prompts (its task), shared by its requests."""
    rng = random.Random(p["seed"])
    systems = [["Adapter %d, task %d. %s" % (k, j, text(
                    rng, rng.randint(*p["system_tokens"])))
                for j in range(p["prompts"])] for k in range(p["adapters"])]
    pick = Zipf(p["adapters"], p["zipf"], rng)
    within = [Zipf(p["prompts"], p["prompt_zipf"], rng)
              for _ in range(p["adapters"])]
    times = poisson_times(rng, p["n"], p["rate"])
    reqs = []
    for i, t in enumerate(times):
        k = pick()
        j = within[k]()
        style = _style(rng, p)
        m, s, lo, hi = p["user_tokens"]
        msgs = [{"role": "system", "content": systems[k][j]},
                {"role": "user", "content": text(rng, lognormal(rng, m, s, lo, hi))}]
        out = rng.randint(*p["output_tokens"])
        body = chat_body(msgs, out, style).replace(
            b'"model": "%s"' % MODEL.encode(),
            b'"model": "%s"' % adapter_name(k).encode()).replace(
            b'"model":"%s"' % MODEL.encode(),
            b'"model":"%s"' % adapter_name(k).encode())
        reqs.append(Request(t, i, 0, "/v1/chat/completions", body,
                            "%s/%d" % (adapter_name(k), j), out, style))
    return reqs


GENERATORS = {"rag": gen_rag, "chat": gen_chat, "templated": gen_templated,
              "code": gen_code, "short": gen_short, "tenants": gen_tenants,
              "lora": gen_lora, "agentic": gen_agentic, "uneven": gen_uneven,
              "noisy": gen_noisy,
              "noisy_equal": gen_noisy, "noisy_quiet": gen_noisy,
              "prio": gen_prio}
# issue 45's overload workloads, run by name only (bench/noisy_report.py,
# bench/prio_report.py)
OVERLOAD = ("noisy", "noisy_equal", "noisy_quiet", "prio")
# the workloads of make bench
NAMES = [w for w in GENERATORS if w not in OVERLOAD]


def generate(name, stream_rate=None, **overrides):
    """generate("rag", n=200, rate=5.0) -> Workload

    stream_rate: generate the stream at that rate and send the same
    requests at "rate", their times scaled by stream_rate / rate (every
    gap, think times included): the same requests at any load, for a
    workload whose stream itself depends on its rate (agentic starts more
    agents within n requests at a higher rate)."""
    if name not in GENERATORS:
        raise KeyError("unknown workload %r (have %s)" % (name, ", ".join(NAMES)))
    p = dict(PARAMS[name])
    for k, v in overrides.items():
        if v is None:
            continue
        if k not in p:
            raise KeyError("workload %s has no parameter %r" % (name, k))
        p[k] = v
    if not stream_rate:
        return Workload(name, p, GENERATORS[name](p))
    if stream_rate <= 0:
        raise ValueError("stream_rate must be > 0")
    rate = p["rate"]
    p["rate"] = stream_rate
    reqs = GENERATORS[name](p)
    for r in reqs:
        r.t *= stream_rate / rate
    p["rate"] = rate
    p["stream_rate"] = stream_rate
    return Workload(name, p, reqs)


def main():
    ap = argparse.ArgumentParser(description="print a workload's summary")
    ap.add_argument("name", choices=list(GENERATORS))
    ap.add_argument("--n", type=int)
    ap.add_argument("--rate", type=float)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--describe", action="store_true")
    ap.add_argument("--dump", type=int, default=0,
                    help="print the first N bodies (truncated)")
    a = ap.parse_args()
    w = generate(a.name, n=a.n, rate=a.rate, seed=a.seed)
    print(w.describe())
    print(json.dumps(w.params))
    for r in w.requests[:a.dump]:
        print("%.3f %s %s %s %s" % (r.t, r.session, r.path, r.group, r.body[:300]))


if __name__ == "__main__":
    main()
