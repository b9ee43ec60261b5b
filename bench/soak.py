#!/usr/bin/python3
"""Soak test of nginx + prefix_aware: bounded in time, loopback only.

An nginx with the module (worker_processes 2) in front of four aiohttp
backends; 64 connections send a seeded random mix of good and bad
requests for SOAK_SECONDS (default 180):

    kind        request                                       expected
    chat        OpenAI chat body, answered at once            200, JSON
    stream      chat with "stream": true, SSE token by token  200, whole stream
    raw         /invocations with a raw body                  200
    badjson     /v1/chat/completions, unusable JSON (cut,     200 (raw-byte
                deep, invalid UTF-8, not an object)           fallback)
    badid       an invalid tenant id header                   400 from nginx
    e503        the backend answers 503                       503
    reset       the backend resets the connection (RST)       502 from nginx
                after reading the request
    cut         the backend sends an SSE header and a few     200, then the
                events, then resets                           stream breaks

The backends act on the request's X-Soak-Fault header, so every outcome
is known in advance.  POST requests are not retried by nginx once sent
(proxy_next_upstream without non_idempotent), so a reset is a 502.

What it checks, and prints as a markdown summary (also written to
SOAK_OUT, default build/soak/summary.md):

  * every request answered as expected (counts by kind and status), no
    client-side error but the broken streams of "cut";
  * no worker crash: the same worker pids from start to end, no
    "exited on signal", [alert], [crit] or [emerg] in the error log;
  * no growth of the workers: VmRSS and the number of open fds of each
    worker sampled every SOAK_SAMPLE seconds (default 5); the baseline
    is taken at rest after a warm-up (10 s, or a tenth of a short run),
    the end at rest after the load (fds sampled again for up to 5 s, as a
    connection may still be closing); fails if the RSS grew by more than
    20 % or there are more fds at the end than at the start;
  * the in-flight counts of the status page sum to 0 at the end.

Environment: SOAK_SECONDS, SOAK_CONCURRENCY (64), SOAK_NGINX
(/usr/sbin/nginx), SOAK_MODULE (objs/ngx_http_prefix_aware_module.so,
empty for an nginx with the module built in), SOAK_PORTS (backend ports,
2016-2019), SOAK_SEED, SOAK_SAMPLE, SOAK_OUT, SOAK_KEEP=1 keeps the
nginx directory.  Debian's /usr/bin/python3 with python3-aiohttp.
"""

import asyncio
import json
import os
import platform
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

import aiohttp
from aiohttp import web

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

ID_HEADER = 'X-Amzn-SageMaker-Prefix-Aware-Id'

KINDS = [            # kind, weight
    ('chat', 30),
    ('stream', 18),
    ('raw', 14),
    ('badjson', 9),
    ('badid', 8),
    ('e503', 7),
    ('reset', 7),
    ('cut', 7),
]

EXPECTED = {
    'chat': 200, 'stream': 200, 'raw': 200, 'badjson': 200,
    'badid': 400, 'e503': 503, 'reset': 502, 'cut': 200,
}


def env_int(name, default):
    v = os.environ.get(name, '')
    return int(v) if v.strip() else default


# --- the backends -----------------------------------------------------------

def _rst(request):
    """closes the request's connection with a TCP RST (SO_LINGER 0)"""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info('socket')
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack('ii', 1, 0))
    transport.abort()


def _sse(i, text):
    chunk = {'id': 'chatcmpl-soak', 'object': 'chat.completion.chunk',
             'choices': [{'index': 0, 'delta': {'content': text},
                          'finish_reason': None}]}
    return ('data: ' + json.dumps(chunk) + '\n\n').encode()


async def handle(request):
    body = await request.read()
    fault = request.headers.get('X-Soak-Fault', '')
    name = request.app['name']

    if fault == 'reset':
        _rst(request)
        return web.Response(status=500)

    if fault == 'e503':
        return web.Response(status=503, text='overloaded\n')

    stream = fault == 'cut' or request.headers.get('X-Soak-Stream') == '1'

    if not stream:
        answer = {'id': 'chatcmpl-soak', 'object': 'chat.completion',
                  'model': 'soak', 'server': name, 'bytes': len(body),
                  'choices': [{'index': 0, 'finish_reason': 'stop',
                               'message': {'role': 'assistant',
                                           'content': 'ok'}}]}
        return web.json_response(answer)

    resp = web.StreamResponse(headers={'Content-Type': 'text/event-stream',
                                       'Cache-Control': 'no-cache'})
    await resp.prepare(request)
    tokens = int(request.headers.get('X-Soak-Tokens', '16'))
    gap = float(request.headers.get('X-Soak-Gap', '0.02'))

    for i in range(tokens):
        await resp.write(_sse(i, 'tok%d ' % i))
        if fault == 'cut' and i == 2:
            await asyncio.sleep(gap)
            _rst(request)
            return resp
        await asyncio.sleep(gap)

    await resp.write(b'data: [DONE]\n\n')
    await resp.write_eof()
    return resp


async def backends_main(ports):
    runners = []
    for i, port in enumerate(ports):
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app['name'] = 'b%d' % (i + 1)
        app.router.add_route('*', '/{tail:.*}', handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, '127.0.0.1', port, backlog=1024).start()
        runners.append(runner)

    print('backends ready', flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    for runner in runners:
        await runner.cleanup()


# --- nginx ------------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


NGINX_CONF = """\
{load_module}
{user}
worker_processes 2;
daemon on;
master_process on;
pid logs/nginx.pid;
error_log logs/error.log notice;

events {{
    worker_connections 4096;
}}

http {{
    access_log off;
    default_type text/plain;
    client_body_temp_path {dir}/client_body_temp;
    proxy_temp_path {dir}/proxy_temp;
    fastcgi_temp_path {dir}/fastcgi_temp;
    uwsgi_temp_path {dir}/uwsgi_temp;
    scgi_temp_path {dir}/scgi_temp;

    upstream llm {{
        prefix_aware length=4096 threshold=8;
{servers}
        keepalive 16;
    }}

    server {{
        listen 127.0.0.1:{port} reuseport;
        client_max_body_size 4m;

        location / {{
            proxy_pass http://llm;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 30s;
        }}

        location = /status {{
            prefix_aware_status;
        }}
    }}
}}
"""


class Nginx:
    def __init__(self, binary, module, backend_ports):
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix='pa-soak-')
        self.port = free_port()
        for d in ('conf', 'logs'):
            os.makedirs(os.path.join(self.dir, d))
        servers = '\n'.join('        server 127.0.0.1:%d max_fails=0;' % p
                            for p in backend_ports)
        conf = NGINX_CONF.format(
            load_module='load_module %s;' % module if module else '',
            user='user root;' if os.geteuid() == 0 else '',
            dir=self.dir, port=self.port, servers=servers)
        with open(os.path.join(self.dir, 'conf', 'nginx.conf'), 'w') as f:
            f.write(conf)
        self.master = None

    def start(self):
        subprocess.run([self.binary, '-p', self.dir + '/', '-c',
                        'conf/nginx.conf'], check=True)
        pidfile = os.path.join(self.dir, 'logs', 'nginx.pid')
        for _ in range(200):
            try:
                with open(pidfile) as f:
                    self.master = int(f.read().strip())
                if len(self.workers()) == 2:
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        raise RuntimeError('nginx did not start, see %s' % self.dir)

    def workers(self):
        pids = []
        for pid in os.listdir('/proc'):
            if not pid.isdigit():
                continue
            try:
                with open('/proc/%s/stat' % pid) as f:
                    stat = f.read()
                ppid = int(stat.rsplit(')', 1)[1].split()[1])
                if ppid != self.master:
                    continue
                with open('/proc/%s/cmdline' % pid, 'rb') as f:
                    cmd = f.read()
                if b'worker process' in cmd:
                    pids.append(int(pid))
            except (OSError, ValueError, IndexError):
                continue
        return sorted(pids)

    def stop(self):
        if not self.master:
            return
        try:
            os.kill(self.master, signal.SIGQUIT)
        except ProcessLookupError:
            return
        for _ in range(200):
            try:
                os.kill(self.master, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        os.kill(self.master, signal.SIGKILL)

    def error_log(self):
        with open(os.path.join(self.dir, 'logs', 'error.log'),
                  errors='replace') as f:
            return f.read()


def proc_sample(pid):
    rss = None
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                rss = int(line.split()[1])
    fds = len(os.listdir('/proc/%d/fd' % pid))
    return rss, fds


# --- the load ---------------------------------------------------------------

SYSTEM = ['You are assistant %02d of the soak test. %s' % (i, 'Answer tersely. ' * (i % 7 + 1))
          for i in range(48)]
DOCS = [' '.join('Paragraph %d of shared document %d.' % (p, d) for p in range(40 + d * 10))
        for d in range(12)]


def make_request(rng, kind):
    """(path, headers, body)"""
    headers = {}
    if kind != 'badid' and rng.random() < 0.3:
        headers[ID_HEADER] = 'tenant-%d' % rng.randrange(20)

    if kind in ('chat', 'stream', 'e503', 'reset', 'cut'):
        messages = [{'role': 'system', 'content': rng.choice(SYSTEM)}]
        if rng.random() < 0.4:
            messages.append({'role': 'user', 'content': rng.choice(DOCS)})
        messages.append({'role': 'user', 'content': 'question %d' % rng.randrange(10 ** 6)})
        req = {'model': 'soak-%d' % rng.randrange(2), 'messages': messages,
               'max_tokens': 64}
        if kind in ('stream', 'cut'):
            req['stream'] = True
            headers['X-Soak-Stream'] = '1'
            headers['X-Soak-Tokens'] = str(rng.randrange(8, 33))
            headers['X-Soak-Gap'] = '%.3f' % rng.uniform(0.005, 0.04)
        if rng.random() < 0.1:
            req['prompt_cache_key'] = 'pck-%d' % rng.randrange(5)
        if kind in ('e503', 'reset', 'cut'):
            headers['X-Soak-Fault'] = kind
        return '/v1/chat/completions', headers, json.dumps(req).encode()

    if kind == 'raw':
        body = (rng.choice(SYSTEM) + rng.choice(DOCS) + ' input %d' % rng.randrange(10 ** 6)).encode()
        return '/invocations', headers, body

    if kind == 'badjson':
        sysm = rng.choice(SYSTEM)
        choice = rng.randrange(5)
        if choice == 0:
            body = ('{"model":"m","messages":[{"role":"user","content":"%s' % sysm).encode()
        elif choice == 1:
            body = b'{"model":"m","x":' + b'[' * 1000 + b']' * 1000 + b'}'
        elif choice == 2:
            body = ('{"messages":[{"role":"user","content":"%s' % sysm).encode() + b'\xc0\xaf"}]}'
        elif choice == 3:
            body = ('["messages", "%s"]' % sysm).encode()
        else:
            body = ('{"model":"m","messages":"%s"}' % sysm).encode()
        return '/v1/chat/completions', headers, body

    # badid
    choice = rng.randrange(3)
    headers[ID_HEADER] = ['x' * 65, 'caf\u00e9', ''][choice]
    if choice == 1:
        headers[ID_HEADER] = 'caf\xc3\xa9'     # the UTF-8 bytes, as latin-1
    return '/v1/chat/completions', headers, b'{"messages":[{"role":"user","content":"hi"}]}'


class Stats:
    def __init__(self):
        self.by = {}           # (kind, outcome) -> count
        self.errors = []       # unexpected: (kind, outcome, detail)
        self.total = 0
        self.latency = []

    def add(self, kind, outcome, ok, detail=''):
        self.total += 1
        self.by[(kind, outcome)] = self.by.get((kind, outcome), 0) + 1
        if not ok and len(self.errors) < 50:
            self.errors.append((kind, outcome, detail))


async def one(session, base, rng, stats):
    kind = rng.choices([k for k, _ in KINDS], [w for _, w in KINDS])[0]
    path, headers, body = make_request(rng, kind)
    want = EXPECTED[kind]
    t0 = time.monotonic()
    try:
        async with session.post(base + path, data=body, headers=headers) as resp:
            status = resp.status
            if kind in ('stream', 'cut') and status == 200:
                data = b''
                async for chunk in resp.content.iter_any():
                    data += chunk
                if kind == 'cut':
                    stats.add(kind, '200 not broken', False, data[-80:])
                    return
                done = data.endswith(b'data: [DONE]\n\n')
                stats.add(kind, '200 stream' if done else '200 short stream', done)
            else:
                await resp.read()
                stats.add(kind, str(status), status == want)
    except aiohttp.ClientPayloadError as e:
        # the stream broke: expected for "cut" only
        stats.add(kind, '200 broken stream', kind == 'cut', repr(e))
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
        stats.add(kind, 'client error ' + type(e).__name__, False, repr(e))
    stats.latency.append(time.monotonic() - t0)


async def load(base, seconds, concurrency, seed, stats):
    timeout = aiohttp.ClientTimeout(total=60)
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    deadline = time.monotonic() + seconds

    async def worker(i):
        rng = random.Random(seed * 1000 + i)
        while time.monotonic() < deadline:
            await one(session, base, rng, stats)

    async with aiohttp.ClientSession(timeout=timeout, connector=connector,
                                     skip_auto_headers=['User-Agent']) as session:
        await asyncio.gather(*(worker(i) for i in range(concurrency)))


async def get_status(base):
    async with aiohttp.ClientSession() as session:
        async with session.get(base + '/status') as resp:
            return json.loads(await resp.read())


def inflight_sum(status):
    return sum(s['inflight'] for u in status['upstreams'].values()
               for s in u['servers'])


# --- the run ----------------------------------------------------------------

def machine():
    cpu = ''
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    cpu = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ''
    try:
        with open('/proc/meminfo') as f:
            mem = '%.1f GiB' % (int(f.readline().split()[1]) / 1024 / 1024)
    except OSError:
        pass
    return '%s, %d CPUs, %s RAM, Linux %s' % (cpu or platform.processor(),
                                              os.cpu_count(), mem,
                                              platform.release())


async def sampler(ng, samples, stop, every):
    while not stop.is_set():
        row = {'t': time.monotonic()}
        for pid in ng.workers():
            try:
                row[pid] = proc_sample(pid)
            except OSError:
                pass
        samples.append(row)
        try:
            await asyncio.wait_for(stop.wait(), every)
        except asyncio.TimeoutError:
            pass


async def run(args):
    ports = args['ports']
    env = dict(os.environ)
    backend = subprocess.Popen([sys.executable, os.path.abspath(__file__),
                                '--backends', ','.join(map(str, ports))],
                               stdout=subprocess.PIPE, env=env)
    ng = None
    try:
        line = backend.stdout.readline()
        if b'ready' not in line:
            raise RuntimeError('the backends did not start')

        ng = Nginx(args['nginx'], args['module'], ports)
        ng.start()
        base = 'http://127.0.0.1:%d' % ng.port
        workers0 = ng.workers()

        seconds = args['seconds']
        warm = 10 if seconds >= 100 else max(2, seconds // 10)
        stats = Stats()

        # warm-up, then the baseline at rest
        t_start = time.monotonic()
        await load(base, warm, args['concurrency'], args['seed'], stats)
        t_active = time.monotonic() - t_start
        await asyncio.sleep(2)
        base_sample = {pid: proc_sample(pid) for pid in ng.workers()}

        samples = []
        stop = asyncio.Event()
        sampling = asyncio.ensure_future(sampler(ng, samples, stop, args['sample']))
        inflight_max = [0]

        async def watch_inflight():
            while not stop.is_set():
                try:
                    inflight_max[0] = max(inflight_max[0], inflight_sum(await get_status(base)))
                except Exception:
                    pass
                try:
                    await asyncio.wait_for(stop.wait(), 1)
                except asyncio.TimeoutError:
                    pass

        watching = asyncio.ensure_future(watch_inflight())
        t_main = time.monotonic()
        await load(base, seconds - warm, args['concurrency'], args['seed'] + 1, stats)
        t_active += time.monotonic() - t_main
        stop.set()
        await sampling
        await watching

        # at rest again
        await asyncio.sleep(2)
        inflight_end = None
        for _ in range(50):
            inflight_end = inflight_sum(await get_status(base))
            if inflight_end == 0:
                break
            await asyncio.sleep(0.1)
        status = await get_status(base)

        # the connection of that status request, or one closing, may still
        # be open in a worker for a moment: a leak stays, so the end is
        # sampled again for up to 5 s until no worker has more fds than at
        # the start
        for _ in range(20):
            end_sample = {pid: proc_sample(pid) for pid in ng.workers()}
            if all(end_sample[pid][1] <= base_sample.get(pid, (0, 0))[1]
                   for pid in end_sample):
                break
            await asyncio.sleep(0.25)
        workers1 = ng.workers()
        log = ng.error_log()
    finally:
        if ng:
            ng.stop()
        backend.send_signal(signal.SIGTERM)
        try:
            backend.wait(10)
        except subprocess.TimeoutExpired:
            backend.kill()

    bad_log = [l for l in log.splitlines()
               if 'exited on signal' in l or '[alert]' in l or '[crit]' in l
               or '[emerg]' in l]

    # the verdicts
    fails = []
    unexpected = sum(n for (k, o), n in stats.by.items()
                     if not ok_outcome(k, o))
    if unexpected:
        fails.append('%d requests not answered as expected' % unexpected)
    if workers0 != workers1:
        fails.append('worker pids changed: %s -> %s' % (workers0, workers1))
    if bad_log:
        fails.append('%d alert/crit/emerg/crash lines in the error log' % len(bad_log))
    if inflight_end != 0:
        fails.append('in flight at the end: %s' % inflight_end)
    if inflight_max[0] > args['concurrency']:
        fails.append('%d in flight sampled, with %d connections'
                     % (inflight_max[0], args['concurrency']))

    rows = []
    for pid in workers0:
        rss = [s[pid][0] for s in samples if pid in s]
        fds = [s[pid][1] for s in samples if pid in s]
        b = base_sample.get(pid, (0, 0))
        e = end_sample.get(pid, (0, 0))
        rss_max = max(rss + [b[0], e[0]])
        fds_max = max(fds + [b[1], e[1]])
        grew = (e[0] - b[0]) / b[0] * 100 if b[0] else 0
        rows.append((pid, b[0], e[0], rss_max, grew, b[1], e[1], fds_max))
        if e[0] > b[0] * 1.2:
            fails.append('worker %d: RSS grew %.0f %% (%d -> %d kB)' % (pid, grew, b[0], e[0]))
        if e[1] > b[1]:
            fails.append('worker %d: %d fds at the end, %d at the start' % (pid, e[1], b[1]))

    up = status['upstreams']['llm']
    md = []
    md.append('## Soak: nginx + prefix_aware, %d s, %d connections' % (seconds, args['concurrency']))
    md.append('')
    md.append('* machine: %s' % machine())
    md.append('* nginx: %s, module: %s; worker_processes 2; 4 aiohttp backends (one process)'
              % (subprocess.run([args['nginx'], '-v'], capture_output=True, text=True).stderr.strip(),
                 args['module'] or 'built in'))
    md.append('* load: %.1f s (a warm-up of %d s, a rest of 2 s, then %d s), seed %d'
              % (t_active, warm, seconds - warm, args['seed']))
    md.append('* requests: **%d** (%.0f/s), latency p50 %.1f ms, p99 %.1f ms, max %.1f ms'
              % (stats.total, stats.total / t_active, pct(stats.latency, 50) * 1000,
                 pct(stats.latency, 99) * 1000, max(stats.latency or [0]) * 1000))
    md.append('* unexpected outcomes: **%d**; worker pids %s at the start and %s at the end; '
              'in flight at the end: **%s** (max sampled during the load: %d)'
              % (unexpected, workers0, workers1, inflight_end, inflight_max[0]))
    md.append('* error log: %d lines with "exited on signal", [alert], [crit] or [emerg]' % len(bad_log))
    md.append('* module counters: keys none/body/openai %d/%d/%d, openai_fallbacks %d, rejected %d, keyed %d'
              % (up['keys']['none'], up['keys']['body'], up['keys']['openai'],
                 up['openai_fallbacks'], up['rejected'], up['keyed']))
    md.append('')
    md.append('| kind | outcome | requests | expected |')
    md.append('|---|---|---:|---|')
    for (k, o), n in sorted(stats.by.items()):
        md.append('| %s | %s | %d | %s |' % (k, o, n, 'yes' if ok_outcome(k, o) else '**no**'))
    md.append('')
    md.append('| worker | RSS start kB | RSS end kB | RSS max kB | growth | fds start | fds end | fds max |')
    md.append('|---|---:|---:|---:|---:|---:|---:|---:|')
    for pid, b_rss, e_rss, m_rss, grew, b_fd, e_fd, m_fd in rows:
        md.append('| %d | %d | %d | %d | %+.1f %% | %d | %d | %d |'
                  % (pid, b_rss, e_rss, m_rss, grew, b_fd, e_fd, m_fd))
    md.append('')
    md.append('(start: at rest after the warm-up; end: at rest after the load; '
              'max: also over %d samples taken every %d s under load)'
              % (len(samples), args['sample']))
    md.append('')
    for pid in workers0:
        md.append('* RSS of %d under load, kB: %s' % (
            pid, ' '.join(str(s[pid][0]) for s in samples if pid in s)))
        md.append('* fds of %d under load: %s' % (
            pid, ' '.join(str(s[pid][1]) for s in samples if pid in s)))
    md.append('')
    md.append('| server | requests | affinity | spill | failover | no_key | in flight |')
    md.append('|---|---:|---:|---:|---:|---:|---:|')
    for s in up['servers']:
        md.append('| %s | %d | %d | %d | %d | %d | %d |' % (
            s['server'], s['requests'], s['affinity'], s['spill'],
            s['failover'], s['no_key'], s['inflight']))
    md.append('')
    md.append('**%s**' % ('PASS' if not fails else 'FAIL: ' + '; '.join(fails)))
    if stats.errors:
        md.append('')
        md.append('First unexpected outcomes:')
        md.append('')
        for k, o, d in stats.errors[:10]:
            md.append('* %s: %s %s' % (k, o, str(d)[:200]))
    if bad_log:
        md.append('')
        md.append('```')
        md.extend(bad_log[:20])
        md.append('```')

    text = '\n'.join(md) + '\n'
    print(text)
    out = args['out']
    os.makedirs(os.path.dirname(out) or '.', exist_ok=True)
    with open(out, 'w') as f:
        f.write(text)

    if ng and not os.environ.get('SOAK_KEEP'):
        shutil.rmtree(ng.dir, ignore_errors=True)
    elif ng:
        print('nginx directory kept: %s' % ng.dir)

    return 0 if not fails else 1


def ok_outcome(kind, outcome):
    if kind == 'stream':
        return outcome == '200 stream'
    if kind == 'cut':
        return outcome == '200 broken stream'
    return outcome == str(EXPECTED[kind])


def pct(values, p):
    if not values:
        return 0
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p / 100))]


def main():
    if len(sys.argv) == 3 and sys.argv[1] == '--backends':
        asyncio.run(backends_main([int(p) for p in sys.argv[2].split(',')]))
        return 0

    module = os.environ.get('SOAK_MODULE')
    if module is None:
        module = os.path.join(ROOT, 'objs', 'ngx_http_prefix_aware_module.so')
    args = {
        'seconds': env_int('SOAK_SECONDS', 180),
        'concurrency': env_int('SOAK_CONCURRENCY', 64),
        'nginx': os.environ.get('SOAK_NGINX') or '/usr/sbin/nginx',
        'module': os.path.abspath(module) if module else '',
        'ports': [int(p) for p in (os.environ.get('SOAK_PORTS') or '2016,2017,2018,2019').split(',')],
        'seed': env_int('SOAK_SEED', 1),
        'sample': env_int('SOAK_SAMPLE', 5),
        'out': os.environ.get('SOAK_OUT') or os.path.join(ROOT, 'build', 'soak', 'summary.md'),
    }
    if len(sys.argv) > 1:
        args['seconds'] = int(sys.argv[1])
    if args['seconds'] < 10:
        sys.exit('SOAK_SECONDS must be at least 10')
    return asyncio.run(run(args))


if __name__ == '__main__':
    sys.exit(main())
