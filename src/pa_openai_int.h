
/*
 * Copyright (C) The ngx_http_prefix_aware_module authors.
 *
 * Private to the OpenAI key reader: its state, shared by the scanner
 * (pa_json.c), the key rules (pa_openai.c) and the text of the key
 * (pa_openai_text.c), and the functions each gives the others.  Plain
 * C, no nginx headers; the public interface is pa_openai.h.
 */


#ifndef _PA_OPENAI_INT_H_INCLUDED_
#define _PA_OPENAI_INT_H_INCLUDED_


#include "pa_xxhash.h"

#include "pa_openai.h"


#define PA_OAI_SEP_ROLE    0x1e
#define PA_OAI_SEP_PIECE   0x1f
#define PA_OAI_SEP_TOKEN   0x1d

/* a separator kept in a section's buffer: a byte UTF-8 never has */
#define PA_OAI_KEPT_SEP    0xe0

/* separators kept in all sections at most: empty strings, 1 MiB */
#define PA_OAI_KEPT_SEPS   (1024 * 1024)

/* kept of a "prompt_cache_key" or an object key; sizeof(res->pck) */
#define PA_OAI_BUF         64


typedef enum {
    PA_T_NULL = 0,
    PA_T_BOOL,
    PA_T_NUMBER,
    PA_T_STRING,
    PA_T_MAP,
    PA_T_ARRAY
} pa_oai_type_e;


/* what a container is */
typedef enum {
    PA_F_SKIP = 0,
    PA_F_TOP,
    PA_F_MESSAGES,
    PA_F_MESSAGE,
    PA_F_PARTS,
    PA_F_PART,
    PA_F_IMAGE_URL,
    PA_F_INPUT_AUDIO,
    PA_F_PROMPT,
    PA_F_TOKENS,
    PA_F_INPUT,                /* Responses "input" items */
    PA_F_ITEM,
    PA_F_SOURCE,               /* an Anthropic image's "source" */
    PA_F_TOOLS,
    PA_F_TOOL,                 /* a tool, or chat's tool "function" */
    PA_F_CALLS,                /* chat's "tool_calls" */
    PA_F_CALL,                 /* a tool call, or its "function" */
    PA_F_JSON                  /* parameters, input: rendered as text */
} pa_oai_frame_e;


/* what the next value in a container is */
typedef enum {
    PA_S_SKIP = 0,
    PA_S_ROOT,
    PA_S_MESSAGES,
    PA_S_PROMPT,
    PA_S_MODEL,
    PA_S_SALT,
    PA_S_PCK,
    PA_S_PREV,                 /* Responses "previous_response_id" */
    PA_S_MESSAGE,
    PA_S_ROLE,
    PA_S_CONTENT,
    PA_S_PART,
    PA_S_PART_TEXT,
    PA_S_IMAGE_URL,
    PA_S_INPUT_AUDIO,
    PA_S_PROMPT_ITEM,
    PA_S_TOKEN,
    PA_S_INPUT,
    PA_S_ITEM,
    PA_S_ITEM_TYPE,
    PA_S_INSTR,                /* Responses "instructions" */
    PA_S_SYSTEM,               /* Anthropic "system" */
    PA_S_TOOLS,
    PA_S_TOOL,
    PA_S_TOOL_TYPE,
    PA_S_TOOL_FUNC,
    PA_S_CALLS,
    PA_S_CALL,
    PA_S_CALL_FUNC,
    PA_S_JSON,
    PA_S_SOURCE
} pa_oai_slot_e;


/*
 * the sections of the key's text, in the order the engine renders them,
 * whatever the body's order: "instructions" or Anthropic's "system", the
 * first message if its role is "system" or "developer", the tools, the
 * conversation
 */
typedef enum {
    PA_SEC_SYSTEM = 0,
    PA_SEC_FIRST,
    PA_SEC_TOOLS,
    PA_SEC_CONV,
    PA_SEC_N
} pa_oai_sec_e;


/* what top-level field the value read is in: which object keys count */
#define PA_SH_CHAT         0x01    /* chat "messages", "prompt" */
#define PA_SH_RESP         0x02    /* Responses "input" */
#define PA_SH_ANTH         0x04    /* Anthropic "messages", "system" */
#define PA_SH_TOOLS        0x08
#define PA_SH_OPENAI       0x10    /* the top level, OpenAI dialect */
#define PA_SH_ANTHROPIC    0x20    /* the top level, Anthropic dialect */


/* where the scanner is */
typedef enum {
    PA_L_VALUE = 0,            /* a value */
    PA_L_FIRST,                /* after "[": a value or "]" */
    PA_L_KEY_FIRST,            /* after "{": a key or "}" */
    PA_L_KEY,                  /* after "," in an object: a key */
    PA_L_COLON,
    PA_L_NEXT,                 /* after a value in a container */
    PA_L_END,                  /* after the top-level value */
    PA_L_STRING,
    PA_L_ESCAPE,               /* after "\" */
    PA_L_HEX,                  /* in the 4 digits of "\u" */
    PA_L_LOW,                  /* after a high surrogate: "\"? */
    PA_L_LOW_U,                /* after a high surrogate and "\": "u"? */
    PA_L_NUMBER,
    PA_L_LITERAL
} pa_oai_lex_e;


/* where a number is: JSON's grammar; ZERO, INT, FRAC and EXP may end it */
typedef enum {
    PA_N_START = 0,
    PA_N_MINUS,
    PA_N_ZERO,
    PA_N_INT,
    PA_N_DOT,
    PA_N_FRAC,
    PA_N_E,
    PA_N_SIGN,
    PA_N_EXP
} pa_oai_num_e;


/* where the bytes of a string or number go */
typedef enum {
    PA_K_SKIP = 0,
    PA_K_TEXT,                 /* the key's text */
    PA_K_PAST,                 /* text past the key: counted */
    PA_K_PEND,                 /* content before the role */
    PA_K_FIELD,                /* the hash of model or cache_salt */
    PA_K_BUF                   /* x->buf: a key or prompt_cache_key */
} pa_oai_sink_e;


/* what a string or number value does for the key */
typedef enum {
    PA_V_NONE = 0,
    PA_V_ROLE,
    PA_V_PIECE,
    PA_V_PEND
} pa_oai_val_e;


typedef struct {
    unsigned char        kind;      /* pa_oai_frame_e */
    unsigned char        slot;      /* pa_oai_slot_e */
    unsigned char        array;
    unsigned char        count;     /* values in it so far, 0 or 1 */
} pa_oai_frame_t;


/*
 * the text of a section that comes in the body before a section rendered
 * ahead of it, kept until that one is complete: UTF-8, each separator a
 * byte PA_OAI_KEPT_SEP + its value (0xfd..0xff, never in UTF-8)
 */
typedef struct {
    unsigned char       *data;
    size_t               len;
    size_t               size;
    size_t               chars;
    size_t               seps;
    unsigned             utf8:1;    /* a byte of its text is over 0x7f */
} pa_oai_kept_t;


struct pa_oai_s {
    XXH3_state_t        *text;
    XXH3_state_t        *field;     /* model or cache_salt being read */
    pa_alloc_t           alloc;

    pa_oai_text_pt       hook;
    void                *hook_ctx;

    size_t               length;
    size_t               cap;
    size_t               chars;
    size_t               past;         /* bytes of text past it */
    size_t               scanned;
    size_t               pieces;       /* content/prompt pieces begun */
    size_t               depth;
    size_t               sep_run;      /* separators not hashed yet */

    uint64_t             model;
    uint64_t             salt;

    pa_oai_status_e      status;
    pa_oai_rc_e          rc;

    /*
     * content of the current message seen before its role: records of
     * a size_t length, a size_t count of separators after it, and its
     * bytes; empty pieces only add to the count, so that there are no
     * more records than characters wanted
     */
    unsigned char       *pend;
    size_t               pend_len;
    size_t               pend_size;
    size_t               pend_chars;
    size_t               pend_rec;     /* the open record */
    size_t               pend_last;    /* the last closed one, + 1 */

    /* the sections: which is written, which is hashed as it comes */
    pa_oai_kept_t        kept[PA_SEC_N];
    size_t               kept_chars;   /* in all of them */
    size_t               kept_seps;

    unsigned char        dialect;      /* pa_oai_dialect_e */
    unsigned char        api;          /* pa_oai_api_e */
    unsigned char        shape;        /* PA_SH_* */
    unsigned char        sec;          /* pa_oai_sec_e written */
    unsigned char        live;         /* the first not complete */
    unsigned char        closed;       /* 1 << sec: complete */
    unsigned char        json_sink;    /* pa_oai_sink_e of a JSON text */
    unsigned char        json_val;     /* pa_oai_val_e of it */
    unsigned char        role_len;     /* of "role", up to 16 kept */
    unsigned char        role[16];

    /* the scanner: a string, an escape, a number, a literal */
    uint32_t             cp;
    uint32_t             hi;           /* high surrogate waiting */
    const char          *lit;

    unsigned char        state;        /* pa_oai_lex_e */
    unsigned char        num;          /* pa_oai_num_e */
    unsigned char        sink;         /* pa_oai_sink_e */
    unsigned char        val;          /* pa_oai_val_e */
    unsigned char        type;         /* pa_oai_type_e of a literal */
    unsigned char        hex;          /* digits of \u read */
    unsigned char        lit_pos;
    unsigned char        sep_byte;     /* the separator of the run */

    /* a UTF-8 character split between buffers */
    unsigned char        u_need;
    unsigned char        u_lo;
    unsigned char        u_hi;
    unsigned char        carry_len;
    unsigned char        carry[4];

    size_t               buf_len;
    unsigned char        buf[PA_OAI_BUF];

    size_t               pck_len;
    unsigned char        pck[PA_OAI_BUF];

    size_t               prev_len;     /* 0: none */
    unsigned char        prev[PA_OAI_BUF];

    unsigned             done:1;
    unsigned             hook_only:1;  /* the text is the hook's alone */
    unsigned             count_past:1; /* to the end, counting "past" */
    unsigned             has_text:1;   /* messages or prompt seen */
    unsigned             in_key:1;
    unsigned             trail:1;      /* a string after the top value */
    unsigned             buf_bad:1;    /* a byte of buf not 0x20..0x7e */
    unsigned             role_seen:1;
    unsigned             model_seen:1;
    unsigned             model_str:1;
    unsigned             salt_seen:1;
    unsigned             salt_str:1;
    unsigned             pck_seen:1;
    unsigned             has_pck:1;
    unsigned             pck_invalid:1;
    unsigned             prev_seen:1;
    unsigned             first:1;      /* in the conversation's first */
    unsigned             has_tools:1;
    unsigned             has_system:1;
    unsigned             wait_api:1;   /* OpenAI: no section is hashed */
    unsigned             newer:1;      /* pa_oai_result_t's */

    pa_oai_frame_t       frames[PA_OAI_MAX_DEPTH];
};


/* pa_json.c: the scanner; returns where it stopped */

const unsigned char *pa_oai_scan(pa_oai_t *x, const unsigned char *p,
    const unsigned char *last);

/* pa_openai_rules.c: the key rules, told by the scanner what it reads */

void pa_oai_open(pa_oai_t *x, pa_oai_type_e type);
void pa_oai_close(pa_oai_t *x);
void pa_oai_begin(pa_oai_t *x, pa_oai_type_e type);
void pa_oai_end(pa_oai_t *x, pa_oai_type_e type);
void pa_oai_key_begin(pa_oai_t *x);
void pa_oai_key(pa_oai_t *x);

/* pa_openai_items.c: what the rules' sections, messages and items do */

void pa_oai_top_key(pa_oai_t *x, pa_oai_frame_t *f);
void pa_oai_top_end(pa_oai_t *x, pa_oai_slot_e slot);
void pa_oai_set_api(pa_oai_t *x, pa_oai_api_e api);
void pa_oai_message_open(pa_oai_t *x);
void pa_oai_message_end(pa_oai_t *x);
void pa_oai_role(pa_oai_t *x, const char *role, size_t len);
void pa_oai_piece(pa_oai_t *x);
void pa_oai_item_type(pa_oai_t *x);
void pa_oai_tool_type(pa_oai_t *x);
void pa_oai_json_value(pa_oai_t *x);
void pa_oai_json_end(pa_oai_t *x);
void pa_oai_json_put(pa_oai_t *x, const char *s, size_t n);


/* the first failure is the one the result tells */

static inline void
pa_oai_fail(pa_oai_t *x, pa_oai_status_e status)
{
    if (x->status == PA_OAI_OK) {
        x->status = status;
    }
}

/*
 * the section written is hashed as it comes: it is the first not
 * complete, and not the first message, whose place is not known yet;
 * in an OpenAI body, once its API is known
 */

static inline int
pa_oai_streams(pa_oai_t *x)
{
    return x->sec == x->live && !x->wait_api
           && (x->sec != PA_SEC_FIRST || (x->closed & (1 << PA_SEC_FIRST)));
}

/* pa_openai_text.c: where the bytes of a value go, the key's text */

void pa_oai_data(pa_oai_t *x, const unsigned char *s, size_t n);
void pa_oai_data_text(pa_oai_t *x, const unsigned char *s, size_t n,
    int ascii);
void pa_oai_pend_open(pa_oai_t *x);
void pa_oai_pend_close(pa_oai_t *x);
void pa_oai_flush(pa_oai_t *x);
void pa_oai_pck(pa_oai_t *x);
void pa_oai_sep(pa_oai_t *x, unsigned char sep, size_t n);
void pa_oai_sep_flush(pa_oai_t *x);
size_t pa_oai_used(pa_oai_t *x);
void pa_oai_sec_close(pa_oai_t *x, pa_oai_sec_e sec);
void pa_oai_sec_drop(pa_oai_t *x, pa_oai_sec_e sec);
void pa_oai_sec_move(pa_oai_t *x, pa_oai_sec_e from, pa_oai_sec_e to);
void pa_oai_advance(pa_oai_t *x);


#endif /* _PA_OPENAI_INT_H_INCLUDED_ */
