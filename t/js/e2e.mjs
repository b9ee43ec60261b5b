// The official clients as a user runs them, against nginx with the module
// in front of bench/sim/llmsim.py (driven by t/095-clients.t).
//
//   node e2e.mjs responses BASE_URL     responses.create (JSON and stream,
//                                       store), 10 turns on
//                                       previous_response_id, retrieve,
//                                       delete, a background cancel
//   node e2e.mjs messages BASE_URL      messages.create, messages.stream and
//                                       messages.countTokens, with a system
//                                       prompt and tools
//   node e2e.mjs stored BASE_URL N T [BASE_URL2]
//                                       N stored conversations of T turns at
//                                       once, then a retrieve of each turn's
//                                       response; with a second URL (another
//                                       nginx host, in sync), turns and
//                                       retrieves alternate between the two
//
// Each prints one JSON line: what it saw. No retries (maxRetries 0): a
// request that fails is counted, not hidden.

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [mode, base, ...rest] = process.argv.slice(2);

const openai = new OpenAI({ baseURL: base + '/v1', apiKey: 'sk-test',
                            maxRetries: 0, timeout: 60000 });
const anthropic = new Anthropic({ baseURL: base, apiKey: 'sk-ant-test',
                                  maxRetries: 0, timeout: 60000 });

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const SYSTEM = 'You are a coding agent. Call one tool per turn. '
    + 'The repository is a C project built with make. '.repeat(40);
const FN = {
    name: 'read_file',
    description: 'Read a file of the repository',
    parameters: { type: 'object', properties: { path: { type: 'string' } },
                  required: ['path'] },
};

function errName(e) {
    return e && e.status ? 'HTTP ' + e.status : String(e && e.name || e);
}

async function responses() {
    const out = {};
    const first = await openai.responses.create({
        model: MODEL, instructions: SYSTEM, store: true,
        max_output_tokens: 8,
        tools: [{ type: 'function', ...FN }],
        input: 'Find where the upstream is initialised.',
    });
    out.create = { status: first.status, text: first.output_text,
                   id_ok: /^resp_/.test(first.id),
                   input_tokens: first.usage.input_tokens };

    const stream = await openai.responses.create({
        model: MODEL, instructions: SYSTEM, max_output_tokens: 8,
        input: 'And where is it freed?', stream: true,
    });
    const types = [];
    let text = '';
    let done = null;
    for await (const ev of stream) {
        if (!types.includes(ev.type)) types.push(ev.type);
        if (ev.type === 'response.output_text.delta') text += ev.delta;
        if (ev.type === 'response.completed') done = ev.response;
    }
    out.stream = { events: types, text, status: done && done.status,
                   same_text: !!done
                       && done.output[0].content[0].text === text };

    // the stream helper checks the event sequence as it accumulates
    const helper = openai.responses.stream({
        model: MODEL, input: 'Say it again.', max_output_tokens: 4,
    });
    const fin = await helper.finalResponse();
    out.stream_helper = { status: fin.status,
                          text: fin.output[0].content[0].text };

    // 10 turns, each continuing the last stored response
    let prev = first.id;
    let turns = 0;
    const errors = [];
    for (let i = 0; i < 10; i++) {
        try {
            const r = await openai.responses.create({
                model: MODEL, previous_response_id: prev, store: true,
                max_output_tokens: 8,
                input: [{ type: 'message', role: 'user',
                          content: 'Turn ' + i + ': go on.' }],
            });
            if (r.previous_response_id === prev && r.status === 'completed')
                turns++;
            prev = r.id;
        } catch (e) {
            errors.push(errName(e));
        }
    }
    out.turns = { ok: turns, errors };
    // cached prompt tokens of the last turn: the conversation's prefix
    try {
        const last = await openai.responses.retrieve(prev);
        out.retrieve = {
            id_ok: last.id === prev, status: last.status,
            prev_ok: typeof last.previous_response_id === 'string',
            cached: last.usage.input_tokens_details.cached_tokens,
            input_tokens: last.usage.input_tokens };
    } catch (e) {
        out.retrieve = { error: errName(e) };
    }
    try {
        await openai.responses.delete(prev);
        out.deleted = true;
    } catch (e) {
        out.deleted = errName(e);
    }
    try {
        await openai.responses.retrieve(prev);
        out.after_delete = 'found';
    } catch (e) {
        out.after_delete = errName(e);
    }
    try {
        await openai.responses.retrieve('resp_nosuchid0000000000000000');
        out.unknown = 'found';
    } catch (e) {
        out.unknown = errName(e);
    }
    const bg = await openai.responses.create({
        model: MODEL, input: 'A long task.', background: true, store: true,
        max_output_tokens: 4000,
    });
    try {
        const cancelled = await openai.responses.cancel(bg.id);
        out.background = { queued: bg.status, cancelled: cancelled.status };
    } catch (e) {
        out.background = { queued: bg.status, cancelled: errName(e) };
    }
    return out;
}

async function messages() {
    const out = {};
    const tools = [{ name: FN.name, description: FN.description,
                     input_schema: FN.parameters }];
    const conv = [
        { role: 'user', content: 'Open the module file.' },
        { role: 'assistant', content: [
            { type: 'tool_use', id: 'toolu_01', name: 'read_file',
              input: { path: 'ngx_http_prefix_aware_module.c' } }] },
        { role: 'user', content: [
            { type: 'tool_result', tool_use_id: 'toolu_01',
              content: 'static ngx_int_t ngx_http_prefix_aware_init(...)' },
            { type: 'text', text: 'What does it do?' }] },
    ];
    const m = await anthropic.messages.create({
        model: MODEL, max_tokens: 8, system: SYSTEM, tools, messages: conv,
    });
    out.create = { type: m.type, role: m.role, stop: m.stop_reason,
                   text: m.content[0].text,
                   input_tokens: m.usage.input_tokens };

    const events = [];
    let text = '';
    const stream = anthropic.messages.stream({
        model: MODEL, max_tokens: 8,
        system: [{ type: 'text', text: SYSTEM,
                   cache_control: { type: 'ephemeral' } }],
        tools, messages: conv,
    });
    stream.on('streamEvent', (ev) => {
        if (!events.includes(ev.type)) events.push(ev.type);
    });
    stream.on('text', (t) => { text += t; });
    const fin = await stream.finalMessage();
    out.stream = { events, text, final_text: fin.content[0].text,
                   stop: fin.stop_reason,
                   cached: fin.usage.cache_read_input_tokens };
    const ct = await anthropic.messages.countTokens({
        model: MODEL, system: SYSTEM, tools, messages: conv,
    });
    out.count_tokens = ct.input_tokens;
    return out;
}

async function stored(n, turns, base2) {
    // one client per host: turn t of a conversation goes to host t % 2
    const hosts = [openai];
    if (base2) {
        hosts.push(new OpenAI({ baseURL: base2 + '/v1', apiKey: 'sk-test',
                                maxRetries: 0, timeout: 60000 }));
    }
    const res = { conversations: n, turns: n * turns, turns_ok: 0,
                  retrieves: 0, retrieves_ok: 0, broken: 0, errors: {},
                  retrieve_errors: {} };
    const count = (e, where = res.errors) => {
        const k = errName(e);
        where[k] = (where[k] || 0) + 1;
    };
    const ids = [];
    const agent = async (k) => {
        let prev = null;
        let broken = false;
        for (let t = 0; t < turns; t++) {
            const body = {
                model: MODEL, store: true, max_output_tokens: 8,
                input: [{ type: 'message', role: 'user',
                          content: 'Conversation ' + k + ', turn ' + t
                              + '. ' + 'Tell me more. '.repeat(8) }],
            };
            if (prev) body.previous_response_id = prev;
            else body.instructions = SYSTEM;
            try {
                const r = await hosts[(k + t) % hosts.length]
                    .responses.create(body);
                res.turns_ok++;
                prev = r.id;
                ids.push(r.id);
            } catch (e) {
                count(e);
                broken = true;
                // as a user would: carry on from the last answer held
            }
        }
        if (broken) res.broken++;
    };
    await Promise.all(Array.from({ length: n }, (_, k) => agent(k)));
    // every answer retrieved, a few at a time
    let next = 0;
    const getter = async () => {
        while (next < ids.length) {
            const i = next++;
            const id = ids[i];
            res.retrieves++;
            try {
                const r = await hosts[i % hosts.length].responses.retrieve(id);
                if (r.id === id) res.retrieves_ok++;
            } catch (e) {
                count(e, res.retrieve_errors);
            }
        }
    };
    await Promise.all(Array.from({ length: 16 }, getter));
    return res;
}

let result;
try {
    if (mode === 'responses') result = await responses();
    else if (mode === 'messages') result = await messages();
    else if (mode === 'stored')
        result = await stored(Number(rest[0] || 100), Number(rest[1] || 10),
                              rest[2]);
    else throw new Error('usage: e2e.mjs responses|messages|stored URL');
} catch (e) {
    result = { fatal: errName(e), message: String(e && e.message) };
}
console.log(JSON.stringify(result));
