
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * A closed-loop HTTP/1.1 load generator for bench/overhead.py and
 * bench/lock.py where wrk is not installed: "conns" keepalive
 * connections, each sending the next of "n" rotating POST bodies as soon
 * as the previous answer is in, for "duration" seconds, on one thread.
 * The bodies are those of overhead.py's wrk script: "tenant-NNN " (raw)
 * or an OpenAI chat whose system message starts so (json), filled with
 * "lorem ipsum dolor sit amet " to "size" bytes.  The output has wrk's
 * lines (Latency, the percentiles, Requests/sec, Non-2xx) so that the
 * same parser reads both.
 *
 *   loadgen -c CONNS -d SECONDS -s SIZE -k raw|json [-n BODIES] URL
 */


#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>


#define LG_BUF      65536
#define LG_LAT_MAX  (1 << 22)


typedef struct {
    int            fd;
    size_t         req;        /* the body index */
    size_t         sent;
    size_t         got;
    double         start;
    char           buf[LG_BUF];
} lg_conn_t;


static char     **lg_reqs;
static size_t    *lg_lens;
static size_t     lg_nreqs;
static size_t     lg_next;
static double    *lg_lat;
static size_t     lg_nlat;
static uint64_t   lg_done, lg_bad, lg_errors;
static struct sockaddr_in  lg_addr;


static double
lg_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return ts.tv_sec + ts.tv_nsec / 1e9;
}


static void
lg_bodies(const char *kind, size_t size, size_t n, const char *host)
{
    char         head[32], *body, *p;
    size_t       i, blen, k;
    const char  *path, *filler = "lorem ipsum dolor sit amet ";
    const char  *pre = "{\"messages\": [{\"role\": \"system\", \"content\": \"";
    const char  *post = "\"}, {\"role\": \"user\", \"content\": \"hello\"}], "
                        "\"model\": \"m\", \"max_tokens\": 1}";
    int          json;

    json = (strcmp(kind, "json") == 0);
    path = json ? "/v1/chat/completions" : "/invocations";

    lg_reqs = calloc(n, sizeof(char *));
    lg_lens = calloc(n, sizeof(size_t));
    body = malloc(size + 1);

    if (lg_reqs == NULL || lg_lens == NULL || body == NULL) {
        perror("malloc");
        exit(1);
    }

    for (i = 0; i < n; i++) {
        snprintf(head, sizeof(head), "tenant-%03zu ", i + 1);
        p = body;

        if (json) {
            p += sprintf(p, "%s%s", pre, head);
            blen = size - strlen(post);

        } else {
            p += sprintf(p, "%s", head);
            blen = size;
        }

        for (k = 0; (size_t) (p - body) < blen; k++) {
            *p++ = filler[k % 27];
        }

        if (json) {
            p += sprintf(p, "%s", post);
        }

        lg_reqs[i] = malloc(size + 512);
        if (lg_reqs[i] == NULL) {
            perror("malloc");
            exit(1);
        }

        k = sprintf(lg_reqs[i], "POST %s HTTP/1.1\r\nHost: %s\r\n"
                    "Content-Type: application/json\r\n"
                    "Content-Length: %zu\r\n\r\n", path, host,
                    (size_t) (p - body));
        memcpy(lg_reqs[i] + k, body, p - body);
        lg_lens[i] = k + (p - body);
    }

    lg_nreqs = n;
    free(body);
}


static int
lg_connect(int ep, lg_conn_t *c)
{
    int                 one = 1;
    struct epoll_event  ev;

    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c->fd == -1) {
        return -1;
    }

    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

    if (connect(c->fd, (struct sockaddr *) &lg_addr, sizeof(lg_addr)) == -1
        && errno != EINPROGRESS)
    {
        close(c->fd);
        return -1;
    }

    c->req = lg_next++ % lg_nreqs;
    c->sent = 0;
    c->got = 0;
    c->start = lg_now();

    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.ptr = c;

    return epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}


/* 1: an answer is complete (its status in *status), 0: more, -1: bad */

static int
lg_parse(lg_conn_t *c, int *status)
{
    char    *end, *h, *line;
    size_t   hlen, clen;

    c->buf[c->got] = '\0';

    end = strstr(c->buf, "\r\n\r\n");
    if (end == NULL) {
        return (c->got >= LG_BUF - 1) ? -1 : 0;
    }

    hlen = end + 4 - c->buf;

    if (sscanf(c->buf, "HTTP/1.%*d %d", status) != 1) {
        return -1;
    }

    clen = 0;

    for (line = strstr(c->buf, "\r\n"); line && line < end;
         line = strstr(line + 2, "\r\n"))
    {
        h = line + 2;

        if (strncasecmp(h, "content-length:", 15) == 0) {
            clen = strtoul(h + 15, NULL, 10);

        } else if (strncasecmp(h, "transfer-encoding:", 18) == 0) {
            /* chunked: complete at the last chunk */
            if (strstr(end + 4, "0\r\n\r\n") == NULL) {
                return 0;
            }

            c->got = 0;
            return 1;
        }
    }

    if (c->got < hlen + clen) {
        return 0;
    }

    /* one request at a time on a connection: nothing follows */
    c->got = 0;

    return 1;
}


int
main(int argc, char **argv)
{
    int                  ep, i, k, n, o, status, conns;
    char                *url, host[64], *colon;
    double               duration, end, t0, sum, elapsed;
    size_t               size, nbodies, j;
    ssize_t              r;
    lg_conn_t           *cs, *c;
    const char          *kind;
    struct epoll_event   evs[256], ev;

    conns = 16;
    duration = 2;
    size = 4096;
    kind = "raw";
    nbodies = 64;

    while ((o = getopt(argc, argv, "c:d:s:k:n:")) != -1) {
        switch (o) {
        case 'c': conns = atoi(optarg); break;
        case 'd': duration = atof(optarg); break;
        case 's': size = strtoul(optarg, NULL, 10); break;
        case 'k': kind = optarg; break;
        case 'n': nbodies = strtoul(optarg, NULL, 10); break;
        default:
            fprintf(stderr, "usage: loadgen -c N -d S -s SIZE -k raw|json "
                    "[-n BODIES] http://127.0.0.1:PORT\n");
            return 2;
        }
    }

    if (optind >= argc || conns <= 0 || nbodies == 0) {
        fprintf(stderr, "loadgen: no URL\n");
        return 2;
    }

    url = argv[optind];

    if (strncmp(url, "http://", 7) == 0) {
        url += 7;
    }

    snprintf(host, sizeof(host), "%s", url);
    host[strcspn(host, "/")] = '\0';

    colon = strchr(host, ':');
    memset(&lg_addr, 0, sizeof(lg_addr));
    lg_addr.sin_family = AF_INET;
    lg_addr.sin_port = htons(colon ? atoi(colon + 1) : 80);

    if (colon) {
        *colon = '\0';
    }

    if (inet_pton(AF_INET, host, &lg_addr.sin_addr) != 1) {
        fprintf(stderr, "loadgen: %s: an IPv4 address is needed\n", host);
        return 2;
    }

    if (colon) {
        *colon = ':';
    }

    lg_bodies(kind, size, nbodies, host);

    lg_lat = malloc(LG_LAT_MAX * sizeof(double));
    cs = calloc(conns, sizeof(lg_conn_t));
    ep = epoll_create1(0);

    if (lg_lat == NULL || cs == NULL || ep == -1) {
        perror("loadgen");
        return 1;
    }

    for (i = 0; i < conns; i++) {
        if (lg_connect(ep, &cs[i]) != 0) {
            perror("connect");
            return 1;
        }
    }

    t0 = lg_now();
    end = t0 + duration;

    while (lg_now() < end) {
        n = epoll_wait(ep, evs, 256, 100);

        for (k = 0; k < n; k++) {
            c = evs[k].data.ptr;

            if (c->sent < lg_lens[c->req]) {
                r = write(c->fd, lg_reqs[c->req] + c->sent,
                          lg_lens[c->req] - c->sent);

                if (r > 0) {
                    c->sent += r;

                } else if (r == -1 && errno != EAGAIN) {
                    goto broken;
                }

                if (c->sent == lg_lens[c->req]) {
                    ev.events = EPOLLIN;
                    ev.data.ptr = c;
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }

                continue;
            }

            r = read(c->fd, c->buf + c->got, LG_BUF - 1 - c->got);

            if (r == 0 || (r == -1 && errno != EAGAIN)) {
                goto broken;
            }

            if (r == -1) {
                continue;
            }

            c->got += r;

            switch (lg_parse(c, &status)) {
            case 0:
                continue;
            case -1:
                goto broken;
            }

            lg_done++;

            if (status < 200 || status > 399) {
                lg_bad++;
            }

            if (lg_nlat < LG_LAT_MAX) {
                lg_lat[lg_nlat++] = lg_now() - c->start;
            }

            c->req = lg_next++ % lg_nreqs;
            c->sent = 0;
            c->start = lg_now();

            ev.events = EPOLLOUT;
            ev.data.ptr = c;
            epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);

            continue;

        broken:

            lg_errors++;
            epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
            close(c->fd);

            if (lg_connect(ep, c) != 0) {
                perror("connect");
                return 1;
            }
        }
    }

    elapsed = lg_now() - t0;

    /* percentiles: a shell sort of the latencies */

    {
        size_t  gap, a, b;
        double  v;

        for (gap = lg_nlat / 2; gap > 0; gap /= 2) {
            for (a = gap; a < lg_nlat; a++) {
                v = lg_lat[a];

                for (b = a; b >= gap && lg_lat[b - gap] > v; b -= gap) {
                    lg_lat[b] = lg_lat[b - gap];
                }

                lg_lat[b] = v;
            }
        }
    }

    sum = 0;

    for (j = 0; j < lg_nlat; j++) {
        sum += lg_lat[j];
    }

    printf("loadgen %d connections, %.0f s, %zu bodies of %zu bytes (%s)\n",
           conns, duration, nbodies, size, kind);

    if (lg_nlat) {
        printf("    Latency   %.2fus\n", sum / lg_nlat * 1e6);
        printf("  Latency Distribution\n");
        printf("     50%%   %.2fus\n", lg_lat[lg_nlat * 50 / 100] * 1e6);
        printf("     90%%   %.2fus\n", lg_lat[lg_nlat * 90 / 100] * 1e6);
        printf("     99%%   %.2fus\n", lg_lat[lg_nlat * 99 / 100] * 1e6);
    }

    printf("  %llu requests in %.2fs\n", (unsigned long long) lg_done,
           elapsed);

    if (lg_errors) {
        printf("  Socket errors: connect 0, read %llu, write 0, "
               "timeout 0\n", (unsigned long long) lg_errors);
    }

    if (lg_bad) {
        printf("  Non-2xx or 3xx responses: %llu\n",
               (unsigned long long) lg_bad);
    }

    printf("Requests/sec: %.2f\n", lg_done / elapsed);

    return 0;
}
