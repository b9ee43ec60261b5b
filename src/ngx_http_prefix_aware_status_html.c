
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * The status page for a person: the status location answers
 * "?format=html", or a browser (Accept: text/html), with one
 * self-contained page (no other file, script or font) whose script reads
 * the same location's JSON every 2 seconds and draws it: each upstream's
 * servers with their in-flight requests, work, routes, what their engines
 * report and how old it is, what their answers said, and with
 * prefix_aware_sync the other hosts' requests and work on them; the
 * index's placements and matched-depth histogram; the queue (queue=) by
 * priority and its wait histogram; the models.  Names are
 * put in as text, never as markup.
 */


#include "ngx_http_prefix_aware.h"


static u_char  ngx_http_prefix_aware_status_page[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\">\n"
    "<head>\n"
    "<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    "\n"
    "<title>prefix_aware status</title>\n"
    "<style>\n"
    "body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #22"
    "2; }\n"
    "h1 { font-size: 1.3em; margin: 0 0 .2em; }\n"
    "h2 { font-size: 1.1em; margin: 1.4em 0 .3em; }\n"
    "h3 { font-size: 1em; margin: .8em 0 .2em; color: #444; }\n"
    "table { border-collapse: collapse; margin: .2em 0 .6em; }\n"
    "th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }"
    "\n"
    "th { background: #f0f0f0; font-weight: 600; }\n"
    "td.l, th.l { text-align: left; }\n"
    ".muted { color: #777; }\n"
    ".err { color: #b00; font-weight: 600; }\n"
    ".up { color: #070; } .down, .failed { color: #b00; }\n"
    ".bar { display: inline-block; height: 10px; background: #4a7fd0;\n"
    "       vertical-align: middle; }\n"
    ".old { color: #b60; }\n"
    "</style>\n"
    "</head>\n"
    "<body>\n"
    "<h1>prefix_aware status</h1>\n"
    "<div id=\"meta\" class=\"muted\">loading...</div>\n"
    "<div id=\"err\" class=\"err\"></div>\n"
    "<div id=\"out\"></div>\n"
    "<script>\n"
    "\"use strict\";\n"
    "var REFRESH = 2000;\n"
    "var url = location.pathname + \"?format=json\";\n"
    "\n"
    "function el(tag, text, cls) {\n"
    "  var e = document.createElement(tag);\n"
    "  if (text !== undefined && text !== null) { e.textContent = String(text"
    "); }\n"
    "  if (cls) { e.className = cls; }\n"
    "  return e;\n"
    "}\n"
    "\n"
    "function table(head, rows) {\n"
    "  var t = el(\"table\"), tr = el(\"tr\");\n"
    "  head.forEach(function (h, i) { tr.appendChild(el(\"th\", h, i ? \"\" :"
    " \"l\")); });\n"
    "  t.appendChild(tr);\n"
    "  rows.forEach(function (r) {\n"
    "    var tr = el(\"tr\");\n"
    "    r.forEach(function (c, i) {\n"
    "      var td = el(\"td\", null, i ? \"\" : \"l\");\n"
    "      if (c instanceof Node) { td.appendChild(c); }\n"
    "      else { td.textContent = c === undefined || c === null ? \"-\" : c;"
    " }\n"
    "      tr.appendChild(td);\n"
    "    });\n"
    "    t.appendChild(tr);\n"
    "  });\n"
    "  return t;\n"
    "}\n"
    "\n"
    "function age(ms) {\n"
    "  if (ms === undefined) { return \"-\"; }\n"
    "  var s = el(\"span\", (ms / 1000).toFixed(1) + \" s\");\n"
    "  if (ms > 10000) { s.className = \"old\"; }\n"
    "  return s;\n"
    "}\n"
    "\n"
    "function hist(h, what) {\n"
    "  var rows = [], max = 1;\n"
    "  h.buckets.forEach(function (n) { if (n > max) { max = n; } });\n"
    "  h.buckets.forEach(function (n, i) {\n"
    "    var b = el(\"span\", null, \"bar\");\n"
    "    b.style.width = Math.round(200 * n / max) + \"px\";\n"
    "    rows.push([\"<= \" + h.le[i], n, b]);\n"
    "  });\n"
    "  return table([what || \"depth (blocks)\", \"requests\", \"\"], rows"
    ");\n"
    "}\n"
    "\n"
    "function upstream(name, u) {\n"
    "  var d = el(\"div\"), srv, ix, rows, q;\n"
    "  d.appendChild(el(\"h2\", \"upstream \" + name));\n"
    "  ix = u.index;\n"
    "  d.appendChild(el(\"div\", \"length \" + u.length + \", threshold \" + "
    "u.threshold\n"
    "    + \", keyed \" + u.keyed + \", rejected \" + u.rejected\n"
    "    + (ix ? \", index \" + ix.used + \" of \" + ix.entries + \" entries,"
    " \"\n"
    "       + ix.evictions + \" evictions\" : \", index off\"), \"muted\"));"
    "\n"
    "\n"
    "  if (u.sync) {\n"
    "    d.appendChild(el(\"div\", \"sync \" + u.sync.listen + \": \"\n"
    "      + u.sync.hosts + \" of \" + u.sync.peers + \" peers heard, load "
    "\"\n"
    "      + u.sync.load + \", sent \" + u.sync.sent + \", received \"\n"
    "      + u.sync.received + \", refused \" + u.sync.refused, \"muted\"));\n"
    "  }\n"
    "\n"
    "  if (u.responses) {\n"
    "    d.appendChild(el(\"div\", \"stored responses \" + u.responses.size\n"
    "      + \" of \" + u.responses.capacity + \", \" + u.responses.evicted\n"
    "      + \" evicted, state routes \" + u.responses.state + \", lost \"\n"
    "      + u.responses.state_lost, \"muted\"));\n"
    "  }\n"
    "\n"
    "  d.appendChild(el(\"h3\", \"servers\"));\n"
    "  rows = u.servers.map(function (s) {\n"
    "    var e = s.engine || {}, f = s.feedback || {}, o = s.other_hosts, r;\n"
    "    r = [s.server, el(\"span\", s.state, s.state), s.inflight, s.work,\n"
    "         s.requests, s.affinity, s.spill, s.failover,\n"
    "         e.waiting, e.running,\n"
    "         e.kv_usage === undefined ? \"-\" : (100 * e.kv_usage).toFixed(1)"
    " + \" %\",\n"
    "         e.capacity, s.engine ? age(e.age_ms) : \"-\",\n"
    "         s.feedback ? f.confirmed + \" / \" + f.shortfall : \"-\",\n"
    "         f.learned_capacity];\n"
    "    if (u.sync) { r.push(o ? o.inflight + \" / \" + o.work : \"-\"); }\n"
    "    return r;\n"
    "  });\n"
    "  d.appendChild(table([\"server\", \"state\", \"in flight\", \"work\", "
    "\"requests\",\n"
    "    \"affinity\", \"spill\", \"failover\", \"engine waiting\", \"running"
    "\",\n"
    "    \"KV usage\", \"KV cache (tokens)\", \"report age\", \"answers ok / "
    "short\",\n"
    "    \"learned cache\"].concat(u.sync ? [\"other hosts: in flight / work"
    "\"]\n"
    "    : []), rows));\n"
    "\n"
    "  if (ix) {\n"
    "    d.appendChild(el(\"h3\", \"placed: match \" + ix.placed.match + \", "
    "cold \"\n"
    "      + ix.placed.cold + \", spill \" + ix.placed.spill + \", least \"\n"
    "      + ix.placed.least));\n"
    "    d.appendChild(hist(ix.depth));\n"
    "  }\n"
    "\n"
    "  if (u.queue) {\n"
    "    q = u.queue;\n"
    "    d.appendChild(el(\"h3\", \"queue: \" + q.waiting + \" waiting of \""
    " + q.size\n"
    "      + \", released \" + q.released + \", passed \" + q.passed\n"
    "      + \", shed: full \" + q.shed.full\n"
    "      + \", timeout \" + q.shed.timeout + \", sheddable \"\n"
    "      + q.shed.sheddable + \", gone \" + q.shed.gone + \", lost \"\n"
    "      + q.shed.lost));\n"
    "    if (q.bands.length) {\n"
    "      d.appendChild(table([\"priority\", \"waiting\", \"released\",\n"
    "        \"passed\", \"full\",\n"
    "        \"timeout\", \"sheddable\", \"gone\", \"lost\", \"work released"
    "\"],\n"
    "        q.bands.map(function (b) {\n"
    "          return [b.priority, b.waiting, b.released, b.passed,\n"
    "                  b.shed.full,\n"
    "                  b.shed.timeout, b.shed.sheddable, b.shed.gone, b.shed.l"
    "ost,\n"
    "                  b.work];\n"
    "        })));\n"
    "    }\n"
    "    if (q.flows && q.flows.length) {\n"
    "      d.appendChild(table([\"flow waiting most\", \"priority\", \"wai"
    "ting\"],\n"
    "        q.flows.map(function (f) { return [f.flow, f.priority, f.waitin"
    "g]; })));\n"
    "    }\n"
    "    d.appendChild(hist({ buckets: q.wait_ms.counts, le: q.wait_ms.le },\n"
    "                       \"wait (ms)\"));\n"
    "  }\n"
    "\n"
    "  if (u.models && u.models.list) {\n"
    "    d.appendChild(el(\"h3\", \"models\"));\n"
    "    d.appendChild(table([\"model\", \"set\", \"requests\", \"no server\""
    "],\n"
    "      u.models.list.map(function (m) {\n"
    "        return [m.name, m.set, m.requests, m.no_server];\n"
    "      })));\n"
    "    if (u.models.servers && u.models.servers.length) {\n"
    "      d.appendChild(table([\"server\", \"models listed\", \"refused"
    " a slot (share \" + u.models.share + \")\", \"failing\", \"serves"
    " all\"],\n"
    "        u.models.servers.map(function (s) {\n"
    "          return [s.server, s.models, s.refused, s.failing, s.serves_al"
    "l];\n"
    "        })));\n"
    "    }\n"
    "  }\n"
    "  return d;\n"
    "}\n"
    "\n"
    "function show(st) {\n"
    "  var out = document.getElementById(\"out\"), n = 0;\n"
    "  out.textContent = \"\";\n"
    "  Object.keys(st.upstreams).forEach(function (k) {\n"
    "    out.appendChild(upstream(k, st.upstreams[k]));\n"
    "    n++;\n"
    "  });\n"
    "  document.getElementById(\"meta\").textContent = n + \" upstream\"\n"
    "    + (n === 1 ? \"\" : \"s\") + \", \" + st.zone.workers + \" worker\""
    "\n"
    "    + (st.zone.workers === 1 ? \"\" : \"s\") + \", updated \"\n"
    "    + new Date().toLocaleTimeString() + \", every \" + REFRESH / 1000 + "
    "\" s\";\n"
    "  document.getElementById(\"err\").textContent = \"\";\n"
    "}\n"
    "\n"
    "function load() {\n"
    "  fetch(url, { cache: \"no-store\" }).then(function (r) {\n"
    "    if (!r.ok) { throw new Error(\"HTTP \" + r.status); }\n"
    "    return r.json();\n"
    "  }).then(show).catch(function (e) {\n"
    "    document.getElementById(\"err\").textContent = \"cannot read \" + ur"
    "l\n"
    "      + \": \" + e.message;\n"
    "  }).then(function () { setTimeout(load, REFRESH); });\n"
    "}\n"
    "\n"
    "load();\n"
    "</script>\n"
    "</body>\n"
    "</html>\n";


ngx_int_t
ngx_http_prefix_aware_status_html(ngx_http_request_t *r)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b->pos = ngx_http_prefix_aware_status_page;
    b->last = b->pos + sizeof(ngx_http_prefix_aware_status_page) - 1;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    ngx_str_set(&r->headers_out.content_type, "text/html; charset=utf-8");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = b->last - b->pos;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    return ngx_http_output_filter(r, &out);
}
